"""One tiny end-to-end learning test with a real threshold: tic-tac-toe against a perfect minimax player.

The small tic_tac_toe preset, trained for a bounded number of iterations, must never lose to a perfect opponent
(uniformly random among minimax-optimal moves, so it probes many lines), playing first or second.
"""
import jax

from az_jax.agent import load_agent
from az_jax.config import override, preset
from az_jax.evaluation import arena
from az_jax.loop import train_and_evaluate
from envs import make_env
from ttt_minimax import perfect_player

ITERATIONS = 30


def test_tic_tac_toe_never_loses_to_perfect_play(tmp_path):
    config = override(preset("tic_tac_toe", "small"), [f"num_iterations={ITERATIONS}", "eval_every=0",
                                                        f"checkpoint_every={ITERATIONS}"])
    train_and_evaluate(config, str(tmp_path), progress=False)
    agent = load_agent(str(tmp_path))
    assert agent.step == ITERATIONS
    env, spec = make_env("tic_tac_toe")
    # 200 games: the agent moves first in the even ones and second in the odd ones (arena.play_match).
    results = jax.jit(lambda key: arena.play_match(env, agent.player(32), perfect_player, key, 200, spec.max_length))(
        jax.random.key(7))
    results = jax.device_get(results)
    losses_first, losses_second = int((results[0::2] < 0).sum()), int((results[1::2] < 0).sum())
    assert (losses_first, losses_second) == (0, 0)
    # Against perfect play the best possible result is a draw in every game.
    assert (results == 0).all()
