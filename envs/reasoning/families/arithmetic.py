"""reasoning-gym's arithmetic datasets (arithmetic, number theory and word problems), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("basic_arithmetic", "basic arithmetic tasks"),
    LibraryFamily(
        "bitwise_arithmetic", "tasks testing understanding of bitwise arithmetic operations"
    ),
    LibraryFamily("calendar_arithmetic", "calendar arithmetic: weekdays, date offsets, leap years"),
    LibraryFamily("chain_sum", "simple arithmetic tasks using only + and - operators"),
    LibraryFamily("count_bits", "count the 1 bits of a number"),
    LibraryFamily(
        "decimal_arithmetic",
        "basic arithmetic tasks using decimal arithmetic and proper operator precedence",
    ),
    LibraryFamily(
        "decimal_chain_sum", "simple decimal arithmetic tasks using only + and - operators"
    ),
    LibraryFamily("dice", "probability of a sum with several dice"),
    LibraryFamily("fraction_simplification", "fraction simplification tasks"),
    LibraryFamily("gcd", "greatest common divisor (gcd) tasks"),
    LibraryFamily("gsm_symbolic", "grade-school word problems generated from GSM8K templates"),
    LibraryFamily("lcm", "least common multiple (lcm) tasks"),
    LibraryFamily("leg_counting", "leg counting arithmetic tasks"),
    LibraryFamily("number_format", "compare numbers written in different formats"),
    LibraryFamily("power_function", "power function exercises"),
    LibraryFamily("prime_factorization", "prime factorization tasks"),
    LibraryFamily("products", "multiply several integers"),
    LibraryFamily(
        "time_intervals", "time interval calculation tasks with various formats and complexities"
    ),
]
