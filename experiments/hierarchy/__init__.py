"""`witness hierarchy`: the paper's hierarchy reproduced end to end, as one sweep of independent seeded jobs.

For every depth L of the configuration:

1. **constructions** -- compile the (L+1)-layer `composition` network and `composition_hybrid` (L full layers plus
   one linear layer; `composition_hybrid_small_table` too where it is installed), find each one's minimal
   precision p* with certify as the checker (`verify.precision`), certify it at p* and keep the certificate. A
   certified row is a proof for every input; `witness check-certificate` re-checks it.
2. **p* against prompt length** -- the parametric certifier's p* for the construction at growing sizes (balanced
   tables m = n_1 = ... = 2^j), under strict and theory semantics, for the first plot.
3. **probes** -- within the (L+1)-layer construction's budget (its H, d_head, d_model and its p* format): the
   hybrid with L-1 full layers plus linear layers (`verify.search.hybrid.search_hybrid`) and L layers of full
   attention (`search_full`), per weight kind and seed, and -- where weights are trained -- the trained control,
   L + 1 full layers at the same budget and protocol: a trained probe row counts as evidence only where its
   control learned (`evidence.judge_against_controls`), and every probe row counts failing / tried inputs. For
   2-Sum the one-layer construction(s) are certified and one (B,k)-sparse layer is probed within their budget
   (`verify.search.sparse.search_sparse`). Every failure a probe reports was confirmed by `verify.search.report`,
   so it replays with `witness run FILE --tokens ...`. A probe that finds nothing has searched, not proved; a
   failure shows that *this* network fails, not that every network of the architecture does.
4. **bounds** -- the theorems' thresholds at each row's budget and prompt length (`verify.theorems`): they say
   whether the lower bounds cover these sizes at all (at the sizes a laptop runs, they do not).
5. **separation** -- per depth in `separation` {L: [...]}, `experiments.separation`: the smallest size at which the
   (L+1)-layer construction, certified at its p* by the parametric proof, has a budget Theorem 1.1 covers; a row
   with `covered: yes` whose certificate needs no network file.
6. **positive sides** -- per depth in `positive_sides`, the chain-of-thought decoders (`composition_cot`,
   `composition_cot_pairs`) and the encoder (`composition_encoder`) at a small family, their p* found by running
   every input at each format (`verify.precision` with the exhaustive checker: a proof for that family, format and
   semantics, no certificate); the report sets them beside the depth's decoder row and the hybrid Theorem 1.1 rules
   out. Every positive side and the decoder are also compiled at each of the section's `depths`, for the plot of
   layers against L.
7. **capacity curves** -- per folder in `curves`, a curve `witness capacity` trained and committed
   (`experiments.capacity`): reported from its own capacity.json, never trained here; the point of it that trained
   fastest is retrained and compared with its stored row, bit for bit, in every run.

A construction that is not installed (its entry point missing) becomes a row with status `not available` and the
reason, never a silent omission.

The modules, each one role:

* `config` -- the configuration's schema (`load_config`; its docstring documents every field);
* `plan` -- the jobs a configuration makes, their estimated cost, the rows the bounds are evaluated at;
* `jobs` -- the job kinds, one function each, dispatched by `run_job`;
* `rows` -- the typed rows the jobs return, and how report.json writes them;
* `evidence` -- what a row is worth (its category), and the trained controls that decide it;
* `run` -- the orchestration, `hierarchy(...)`, which writes report.json;
* `words` -- the sentences the rows carry; `report` -- report.md; `plots` -- the plots;
* `curves` -- the committed capacity curves: report.json's entry, summary line and report.md section of each.
"""

from experiments.hierarchy.config import Config, load_config
from experiments.hierarchy.evidence import judge_against_controls
from experiments.hierarchy.jobs import run_job
from experiments.hierarchy.report import summary_lines
from experiments.hierarchy.run import hierarchy

__all__ = ["Config", "load_config", "hierarchy", "run_job", "judge_against_controls", "summary_lines"]
