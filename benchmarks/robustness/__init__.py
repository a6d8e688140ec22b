"""Bad input from users, ``python -m benchmarks.robustness`` (``__main__``): the case table
(:mod:`.cases`, also run by ``tests/securefgl/robustness/``) and its report."""
