"""FedVN's report gives the protected-vs-plain verdict with the standard error it rests on."""

from benchmarks.reproduce_fedvn.report import _protected_phrase


def test_verdict_on_the_mean_with_its_standard_error():
    assert _protected_phrase([0.4, 0.6], "MISSED") == (
        "+0.50 (within 0.5 points; standard error 0.10)")  # fmt: skip
    assert _protected_phrase([8.0, -4.0, -3.0], "misses").startswith("+0.33 (within 0.5")


def test_a_miss_and_a_single_pair():
    assert _protected_phrase([1.0], "misses") == "+1.00 (misses 0.5 points)"
    assert _protected_phrase([-0.9, -0.7], "MISSED").startswith("-0.80 (MISSED 0.5 points;")
