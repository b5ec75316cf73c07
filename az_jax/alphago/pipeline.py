"""Every stage of AlphaGo (Silver et al., Nature 2016) from one preset into an agent directory, in order:

    games       9×9: GNU Go self-play games into gnugo_games.default_dir(9) (19×19: none, the professional corpus)
    data        the position data set at dataset.default_path(N), built when missing (9×9: or older than the games)
    sl          p_σ                    DIR/sl              supervised.train (resumes)
    rollout     p_π                    DIR/rollout.npz     pattern_training.train in DIR/rollout_run (resumes), then
                                                           the policy file (skipped when it exists)
    tree        p_τ                    DIR/tree.npz        as rollout, in DIR/tree_run, with p_π's settings
    rl          p_ρ                    DIR/rl              reinforce.train from DIR/sl (resumes)
    value-data  one position a game    DIR/value_data/     value_data.build (resumes, appends)
    value       v_θ                    DIR/value           value_training.train (resumes)

    report = run(presets.PRESETS["9x9-cpu"], "runs/alphago/ag9-cpu")      # or until="sl", data="my_positions"

Each stage is a call of its module (the agent directory's layout is agent.py's); one whose output is complete is
skipped, one that was interrupted resumes, so running the same command again continues where it stopped. DIR/preset.json
(presets.PRESET_FILE: the preset's name, board size and default search) is written first; a directory made with
another preset is refused. `data` names an existing position data set to train p_σ and p_π on instead of the
expert games and the cached data set. A preset with sl_passes / value_passes sets p_σ's and v_θ's steps from the
data actually given (presets.AlphaGoPreset.sl_config / value_config): the paper's passes over it.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from az_jax.alphago import (
    agent,
    checkpoints,
    corpus,
    dataset,
    gnugo_games,
    pattern_training,
    presets,
    reinforce,
    rollout_policy,
    supervised,
    tree_policy,
    value_data,
    value_store,
    value_training,
)
from az_jax.alphago.presets import AlphaGoPreset
from az_jax.runtime import files

STAGES = ("games", "data", "sl", "rollout", "tree", "rl", "value-data", "value")


class PipelineError(Exception):
    """An agent directory made with another preset, an unknown stage, a data set that does not fit: one line."""


def claim(directory: str, preset: AlphaGoPreset) -> None:
    """Writes DIR/preset.json for `preset`; PipelineError if DIR was made with another preset."""
    saved = presets.read_saved(directory)
    if saved is not None and saved["name"] != preset.name:
        raise PipelineError(
            f"{directory} was made with preset {saved['name']!r}, not {preset.name!r}: use another directory"
        )
    if saved != preset.saved():
        with files.replaced_whole(os.path.join(directory, presets.PRESET_FILE)) as f:
            json.dump(preset.saved(), f, indent=1)


def _latest_step(run_dir: str) -> int | None:
    """The latest checkpoint of a stage's run directory, None when there is none (nothing is created)."""
    if not os.path.isdir(os.path.join(run_dir, "checkpoints")):
        return None
    return checkpoints.manager(run_dir).latest_step()


def _newest_game(games_dir: Path) -> float:
    """The modification time of the newest game file (or marker) of a games directory, 0 when there is none."""
    times = [p.stat().st_mtime for p in games_dir.glob("game-*")] if games_dir.is_dir() else []
    return max(times, default=0.0)


def run(
    preset: AlphaGoPreset,
    directory: str | os.PathLike,
    *,
    until: str | None = None,
    data: str | os.PathLike | None = None,
    workers: int | None = None,
    log: Callable[[dict], None] = print,
) -> dict:
    """Runs (or continues) the stages of `preset` into `directory`, stopping after stage `until` (default: all); see
    the module docstring. `workers`: GNU Go processes for the 9×9 games (default: one per core). Returns
    {"preset", "directory", "stages": {stage: its report, with "status" "done" (and the stage's "seconds") or
    "skipped"}}. `log` gets each stage's progress lines and its report, with "stage" added."""
    if until is not None and until not in STAGES:
        raise PipelineError(f"unknown stage {until!r}; the stages are {', '.join(STAGES)}")
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    claim(directory, preset)
    size = preset.size
    stages = STAGES[: STAGES.index(until) + 1] if until else STAGES
    data_path = Path(data) if data is not None else dataset.default_path(size)
    games_dir = gnugo_games.default_dir(size)
    part = functools.partial(agent.part, directory)
    reports: dict[str, dict] = {}

    def logger(stage: str) -> Callable[[dict], None]:
        return lambda line: log({"stage": stage, **line})

    @functools.cache
    def positions() -> tuple[dataset.Positions, dataset.Positions]:
        train, test = dataset.load_split(data_path)
        if train.size != size:
            raise PipelineError(f"{data_path} holds {train.size}x{train.size} positions, not {size}x{size}")
        return train, test

    def done(stage: str, report: dict) -> None:
        reports[stage] = {"status": "done", **report, "seconds": round(time.perf_counter() - started, 1)}
        log({"stage": stage, **reports[stage]})

    def skipped(stage: str, why: str) -> None:
        reports[stage] = {"status": "skipped", "why": why}
        log({"stage": stage, **reports[stage]})

    for stage in stages:
        started = time.perf_counter()
        if stage == "games":
            if data is not None:
                skipped(stage, f"the data set {data_path} is given")
            elif preset.expert_games == 0:
                skipped(stage, "the professional corpus (corpus.default_sources) needs no games")
            elif games_dir.is_dir() and len(gnugo_games.scan(games_dir, size)[0]) >= preset.expert_games:
                skipped(stage, f"{games_dir} holds {preset.expert_games} games or more")
            else:
                done(
                    stage,
                    gnugo_games.generate(
                        games_dir,
                        preset.expert_games,
                        size=size,
                        level=preset.expert_level,
                        workers=workers or os.cpu_count() or 1,
                    ),
                )
        elif stage == "data":
            if data is not None:
                skipped(stage, f"the data set {data_path} is given")
            elif preset.expert_games == 0:
                if data_path.exists():
                    skipped(stage, f"{data_path} exists")
                else:
                    done(stage, dataset.build(corpus.default_sources(size), size, data_path))
            elif data_path.exists() and data_path.stat().st_mtime >= _newest_game(games_dir):
                skipped(stage, f"{data_path} exists and is newer than the games in {games_dir}")
            else:  # missing, or games were added since it was built
                done(stage, dataset.build([games_dir], size, data_path, overwrite=True))
        elif stage == "sl":
            run_dir = part("sl")
            step = _latest_step(run_dir)
            sl_config = preset.sl_config(len(positions()[0])) if preset.sl_passes else preset.sl
            if step is not None and step >= sl_config.steps and supervised.read_config(run_dir) == sl_config:
                skipped(stage, f"{run_dir} is at step {step}")
            else:
                train, test = positions()
                done(stage, supervised.train(sl_config, train, test, run_dir, str(data_path), log=logger(stage)))
        elif stage in ("rollout", "tree"):  # p_τ (the expansion threshold's placeholder priors) trains as p_π
            path = part(stage)
            if os.path.exists(path):
                skipped(stage, f"{path} exists")
            else:
                train, test = positions()
                family = rollout_policy.ROLLOUT if stage == "rollout" else tree_policy.TREE
                run_dir = part(f"{stage}_run")
                policy, report = pattern_training.train(
                    preset.rollout, train, test, run_dir, family, str(data_path), log=logger(stage)
                )
                family.save(path, policy, report)
                done(stage, report)
        elif stage == "rl":
            run_dir = part("rl")
            step = _latest_step(run_dir)
            if step is not None and step >= preset.rl.iterations and reinforce.read_config(run_dir)[0] == preset.rl:
                skipped(stage, f"{run_dir} is at iteration {step}")
            else:
                done(stage, reinforce.train(preset.rl, part("sl"), run_dir, log=logger(stage)))
        elif stage == "value-data":
            sl_config, sl_params, _ = supervised.restore_params(part("sl"))
            rl_config, rl_params, _ = reinforce.restore_params(part("rl"))
            report = value_data.build(
                part("value_data"),
                (sl_config, sl_params),
                (rl_config, rl_params),
                size,
                preset.value_games,
                batch=preset.value_batch,
                log=logger(stage),
            )
            if report["new_positions"]:
                done(stage, report)
            else:
                skipped(stage, f"{part('value_data')} holds {report['games']} games")
        elif stage == "value":
            run_dir = part("value")
            step = _latest_step(run_dir)
            train_v, test_v = value_store.load_split(part("value_data"))
            value_config = preset.value_config(len(train_v))
            if step is not None and step >= value_config.steps and value_training.read_config(run_dir) == value_config:
                skipped(stage, f"{run_dir} is at step {step}")
            else:
                done(
                    stage,
                    value_training.train(
                        value_config, train_v, test_v, run_dir, data_path=part("value_data"), log=logger(stage)
                    ),
                )
    return {"preset": preset.name, "directory": directory, "stages": reports}
