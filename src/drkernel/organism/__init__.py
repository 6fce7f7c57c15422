"""The organism: a miniature Dr. Kernel that runs in minutes on one GPU (docs/ORGANISM.md).

Data flows one way::

    families (Spec -> Problem) -> corpus (bad-habit programs) -> model (tokenizer + SFT from scratch)
      -> env (program -> render -> gym verdict -> reward, per arm) -> rl.trainer -> run (JSON) -> report

Modules: `ops` (the operator vocabulary), `families` (generated problems), `program` (the language the
policy writes and the solution writers), `render` (program -> Triton solution), `corpus`, `model`,
`env` (`OrganismEnv`), `arms` (ablation arms and scales), `run`, `report` and `svg`; the claims:
`claims` (the registered table), `stats` (the permutation test), `parallel` (fresh seeds, runs as
parallel processes) and `turns` (their shared GPU); `trap` (the lazy trap's cost model), `probe`,
`bias` (GRPO's per-turn shrinkage against TRLOO).
Imports only torch, triton, transformers/tokenizers and the standard library (the GPU host has
nothing else).
"""
