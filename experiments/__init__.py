"""Experiments: the hierarchy (`witness hierarchy`), capacity curves, the separation, and the trained networks the
main job replays. Each is a configuration of jobs run by `lab.sweep`, producing rows that a report layer turns
into prose, tables and plots. They import everything below them and nothing imports them but the command line."""
