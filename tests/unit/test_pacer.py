from vectide.services.common.pacer import Pacer


def test_fast_while_active_then_backs_off_to_idle():
    pacer = Pacer(fast_s=0.05, idle_s=1.0, hold_s=1.0)
    pacer.activity(100.0)
    assert pacer.active(100.5) and pacer.interval(100.5) == 0.05
    assert not pacer.active(101.0)
    # after the hold the period grows with the idle time, never past idle_s
    assert pacer.interval(101.02) == 0.05
    assert abs(pacer.interval(101.3) - 0.3) < 1e-9
    assert pacer.interval(101.9) > pacer.interval(101.5) > 0.05
    assert pacer.interval(105.0) == 1.0


def test_never_active_means_idle_period():
    pacer = Pacer(fast_s=0.05, idle_s=1.0)
    assert not pacer.active(0.0)
    assert pacer.interval(0.0) == 1.0


def test_activity_returns_it_to_fast_at_once_and_never_moves_back_in_time():
    pacer = Pacer(fast_s=0.05, idle_s=1.0)
    pacer.activity(10.0)
    assert pacer.interval(20.0) == 1.0
    pacer.activity(20.0)
    pacer.activity(15.0)  # a late report of an older event keeps the newer one
    assert pacer.interval(20.5) == 0.05


def test_idle_equal_to_fast_disables_back_off():
    pacer = Pacer(fast_s=0.05, idle_s=0.05)
    assert pacer.interval(0.0) == 0.05
    pacer.activity(1.0)
    assert pacer.interval(100.0) == 0.05
