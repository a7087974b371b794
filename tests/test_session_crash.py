"""Sessions survive SIGKILL: a driver process labels in a loop and is killed at random
moments, during labelling and during checkpointing (bigsearch.testing.session_crash).
benchmarks/session_crash_stress.py runs the same with 1,000 kills."""

from bigsearch.testing.session_crash import crash_test


def test_every_acknowledged_label_survives_sigkill(tmp_path):
    # 40 kills: of 120, 47 landed during a checkpoint write and 63 between a journal write and
    # its acknowledgement, so each window is hit ~15 times here (benchmarks/session_crash_stress.py
    # runs thousands)
    stats = crash_test(tmp_path, kills=40, seed=7)
    print(stats)
    assert stats["kills"] == stats["sigkilled"] == 40            # each driver died by SIGKILL
    # after each kill the session opened, held every acknowledged label exactly once,
    # and its next query and f equalled the uninterrupted reference's (else crash_test raises)
    assert stats["checked"] >= 33
    assert stats["during_checkpoint"] > 0, "no kill landed during a checkpoint write"
    assert stats["in_flight_label"] > 0, "no kill landed between a journal write and its acknowledgement"
    assert stats["labels_acknowledged"] > stats["kills"]
