"""Built-in problems, part 2: lists, dicts, numbers and recursion."""

from __future__ import annotations

from hypothesis import strategies as st

from pytest_specdecode.coding.problems_basic import make, one

_INTS = st.lists(st.integers(-20, 20), max_size=15)
_IP_PART = st.one_of(
    st.integers(0, 300).map(str),
    st.sampled_from(["", "0", "00", "01", "a", "-1", " 1", "1e2", "255", "256", "999"]),
)

PROBLEMS = [
    make(
        "flatten",
        "flatten(items: list) -> list[int]",
        "takes a list whose elements are integers or (arbitrarily nested) lists of the same"
        " kind and returns all the integers in order as one flat list.",
        "def flatten(items):\n"
        "    out = []\n"
        "    for x in items:\n"
        "        if isinstance(x, list):\n"
        "            out.extend(flatten(x))\n"
        "        else:\n"
        "            out.append(x)\n"
        "    return out\n",
        [([],), ([1, [2, [3, [4]]], 5],), ([[[]]],), ([[1], [], [2, 3]],)],
        one(
            st.lists(
                st.recursive(st.integers(-9, 9), lambda c: st.lists(c, max_size=4), max_leaves=12),
                max_size=5,
            )
        ),
    ),
    make(
        "has_pair_with_sum",
        "has_pair_with_sum(nums: list[int], target: int) -> bool",
        "returns True if two elements at different positions of `nums` add up to `target`,"
        " and False otherwise.",
        "def has_pair_with_sum(nums, target):\n"
        "    seen = set()\n"
        "    for x in nums:\n"
        "        if target - x in seen:\n"
        "            return True\n"
        "        seen.add(x)\n"
        "    return False\n",
        [([], 0), ([1, 2, 3], 5), ([3], 6), ([3, 3], 6), ([1, 2], 4)],
        st.tuples(_INTS, st.integers(-40, 40)),
    ),
    make(
        "binary_search",
        "binary_search(items: list[int], target: int) -> int",
        "returns the index of `target` in `items`, a list of distinct integers sorted in"
        " ascending order, or -1 if it is absent. It must run in O(log n) time.",
        "def binary_search(items, target):\n"
        "    lo, hi = 0, len(items) - 1\n"
        "    while lo <= hi:\n"
        "        mid = (lo + hi) // 2\n"
        "        if items[mid] == target:\n"
        "            return mid\n"
        "        if items[mid] < target:\n"
        "            lo = mid + 1\n"
        "        else:\n"
        "            hi = mid - 1\n"
        "    return -1\n",
        [([], 3), ([1, 3, 5], 5), ([1, 3, 5], 1), ([1, 3, 5], 4), ([2], 2)],
        st.tuples(st.sets(st.integers(-50, 50), max_size=20).map(sorted), st.integers(-60, 60)),
    ),
    make(
        "max_subarray_sum",
        "max_subarray_sum(nums: list[int]) -> int",
        "returns the largest sum of a non-empty contiguous slice of the non-empty list `nums`.",
        "def max_subarray_sum(nums):\n"
        "    best = cur = nums[0]\n"
        "    for x in nums[1:]:\n"
        "        cur = max(x, cur + x)\n"
        "        best = max(best, cur)\n"
        "    return best\n",
        [([1],), ([-2, 1, -3, 4, -1, 2, 1, -5, 4],), ([-3, -1, -2],), ([5, -1, 5],)],
        one(st.lists(st.integers(-20, 20), min_size=1, max_size=15)),
    ),
    make(
        "chunk",
        "chunk(items: list[int], size: int) -> list[list[int]]",
        "splits `items` into consecutive lists of length `size` (size >= 1); the last one"
        " may be shorter, and an empty list gives [].",
        "def chunk(items, size):\n"
        "    return [items[i:i + size] for i in range(0, len(items), size)]\n",
        [([], 3), ([1, 2, 3, 4, 5], 2), ([1, 2], 5), ([1, 2, 3], 1)],
        st.tuples(_INTS, st.integers(1, 6)),
    ),
    make(
        "rotate_right",
        "rotate_right(items: list[int], k: int) -> list[int]",
        "returns a new list with `items` rotated right by `k` places (k may be larger than"
        " the length or negative, which rotates left); an empty list gives [].",
        "def rotate_right(items, k):\n"
        "    if not items:\n"
        "        return []\n"
        "    k %= len(items)\n"
        "    return items[-k:] + items[:-k] if k else list(items)\n",
        [([], 3), ([1, 2, 3], 1), ([1, 2, 3], 4), ([1, 2, 3], -1), ([1], 0)],
        st.tuples(_INTS, st.integers(-20, 20)),
    ),
    make(
        "dedupe",
        "dedupe(items: list[int]) -> list[int]",
        "returns the elements of `items` without repeats, each kept at its first occurrence,"
        " in the original order.",
        "def dedupe(items):\n    return list(dict.fromkeys(items))\n",
        [([],), ([3, 1, 3, 2, 1],), ([1, 1, 1],)],
        one(st.lists(st.integers(0, 6), max_size=15)),
    ),
    make(
        "invert_dict",
        "invert_dict(d: dict[str, int]) -> dict[int, list[str]]",
        "returns a dict mapping each value of `d` to the sorted list of the keys that map to it.",
        "def invert_dict(d):\n"
        "    out = {}\n"
        "    for key, value in d.items():\n"
        "        out.setdefault(value, []).append(key)\n"
        "    return {value: sorted(keys) for value, keys in out.items()}\n",
        [({},), ({"a": 1, "b": 2, "c": 1},), ({"x": 0},)],
        one(st.dictionaries(st.text(alphabet="abcd", max_size=3), st.integers(0, 3), max_size=8)),
    ),
    make(
        "second_largest",
        "second_largest(nums: list[int]) -> int | None",
        "returns the second largest distinct value in `nums`, or None when it has fewer than"
        " two distinct values.",
        "def second_largest(nums):\n"
        "    values = sorted(set(nums))\n"
        "    return values[-2] if len(values) >= 2 else None\n",
        [([],), ([1],), ([2, 2],), ([1, 3, 3, 2],), ([-1, -5],)],
        one(st.lists(st.integers(-5, 5), max_size=10)),
    ),
    make(
        "primes_up_to",
        "primes_up_to(n: int) -> list[int]",
        "returns all prime numbers p with p <= n in ascending order ([] when n < 2).",
        "def primes_up_to(n):\n"
        "    if n < 2:\n"
        "        return []\n"
        "    sieve = [True] * (n + 1)\n"
        "    sieve[0] = sieve[1] = False\n"
        "    for i in range(2, int(n ** 0.5) + 1):\n"
        "        if sieve[i]:\n"
        "            sieve[i * i :: i] = [False] * len(range(i * i, n + 1, i))\n"
        "    return [i for i, is_prime in enumerate(sieve) if is_prime]\n",
        [(-1,), (0,), (2,), (10,), (30,), (1000,)],
        one(st.integers(-10, 2000)),
    ),
    make(
        "hanoi_moves",
        "hanoi_moves(n: int) -> list[tuple[str, str]]",
        "returns the shortest sequence of moves that takes a tower of n >= 0 disks from peg"
        " 'A' to peg 'C' using peg 'B', each move a (from_peg, to_peg) tuple, never putting"
        " a larger disk on a smaller one.",
        "def hanoi_moves(n, src='A', dst='C', via='B'):\n"
        "    if n == 0:\n"
        "        return []\n"
        "    first = hanoi_moves(n - 1, src, via, dst)\n"
        "    return first + [(src, dst)] + hanoi_moves(n - 1, via, dst, src)\n",
        [(0,), (1,), (2,), (3,)],
        one(st.integers(0, 8)),
    ),
    make(
        "is_valid_ipv4",
        "is_valid_ipv4(s: str) -> bool",
        "returns True if `s` is a dotted IPv4 address: exactly four parts separated by '.',"
        " each a decimal number from 0 to 255 written with ASCII digits only and without"
        " leading zeros ('0' itself is fine), with no other characters.",
        "def is_valid_ipv4(s):\n"
        "    parts = s.split('.')\n"
        "    if len(parts) != 4:\n"
        "        return False\n"
        "    for part in parts:\n"
        "        if not part or len(part) > 3 or any(c not in '0123456789' for c in part):\n"
        "            return False\n"
        "        if part != '0' and part.startswith('0'):\n"
        "            return False\n"
        "        if int(part) > 255:\n"
        "            return False\n"
        "    return True\n",
        [("192.168.0.1",), ("0.0.0.0",), ("255.255.255.256",), ("01.2.3.4",), ("1.2.3",), ("",)],
        one(
            st.one_of(
                st.lists(_IP_PART, min_size=3, max_size=5).map(".".join),
                st.text(alphabet="0123456789.", max_size=16),
            )
        ),
    ),
]
