#!/usr/bin/env bash
# Train a longread memory agent with verl 0.9.1 on one node of 8 GPUs, vLLM rollouts.
# NOT RUN: no GPU was available where this was written (docs/verl.md says what ran on CPU).
#
#   AGENT=memagent|rememr1|memreread TRAIN=train.parquet VAL=val.parquet \
#     bash examples/verl/train.sh [hydra overrides, e.g. trainer.n_gpus_per_node=4]
#
# The settings live in examples/verl/<AGENT>.yaml (on top of verl's ppo_trainer.yaml) and the
# agent loops in examples/verl/agent_loop.yaml; this script only adds the data and the module
# verl must import. Set up the GPU machine first (docs/verl.md): verl[vllm]==0.9.1 and
# longread (pip install -e .) in one environment, Parquet files from make_dataset.py.
set -euo pipefail
cd "$(dirname "$0")/../.."  # agent_loop_config_path is relative to the repository root

AGENT=${AGENT:-memagent}
TRAIN=${TRAIN:?set TRAIN to the training Parquet file (examples/verl/make_dataset.py)}
VAL=${VAL:-$TRAIN}
case "$AGENT" in
  memagent | rememr1 | memreread) ;;
  *) echo "AGENT must be memagent, rememr1 or memreread, not $AGENT" >&2; exit 2 ;;
esac

# verl imports the modules named here on `import verl`, in this process and (through the
# config's ray_kwargs runtime env) in every Ray worker: the longread agent loop, advantage
# estimators and trainer modes get registered everywhere.
export VERL_USE_EXTERNAL_MODULES=longread.train.verl.plugin

exec python3 -m verl.trainer.main_ppo \
  --config-path="$PWD/examples/verl" --config-name="$AGENT" \
  data.train_files="$TRAIN" data.val_files="$VAL" \
  "$@"
