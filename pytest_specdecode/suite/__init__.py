"""The built-in suite: ``pytest --pyargs pytest_specdecode.suite``.

Select parts with ``-m coding``, ``-m throughput`` or ``-m lossless``.
"""
