"""reasoning-gym's algorithmic datasets (string, list and matrix algorithms), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("ab", "rewrite A::B token systems to their normal form"),
    LibraryFamily("base_conversion", "base conversion tasks"),
    LibraryFamily("binary_alternation", "binary alternation exercises"),
    LibraryFamily("binary_matrix", "binary matrix exercises"),
    # levels 3-4 of 4 fail its config check (rotation must be in [1, 25])
    LibraryFamily("caesar_cipher", "caesar cipher encryption/decryption tasks", levels=(0.0, 0.33)),
    LibraryFamily("count_primes", "count primes exercises"),
    LibraryFamily("cryptarithm", "solve a letter-for-digit addition puzzle"),
    LibraryFamily("game_of_life", "game of life games"),
    LibraryFamily("group_anagrams", "group anagrams exercises"),
    # levels 3-4 of 4: the generator's search runs for minutes
    LibraryFamily(
        "jugs", "water jug puzzles: measure an amount with jugs of given sizes", levels=(0.0, 0.33)
    ),
    LibraryFamily("letter_counting", "count a letter's occurrences in a text span"),
    LibraryFamily("letter_jumble", "word letter jumbling tasks"),
    LibraryFamily("manipulate_matrix", "manipulate matrix exercises"),
    LibraryFamily("number_filtering", "number filtering tasks"),
    LibraryFamily("number_sorting", "number sorting tasks"),
    LibraryFamily("palindrome_generation", "assemble the given letters into a palindrome"),
    LibraryFamily("palindrome_partitioning", "palindrome partitioning exercises"),
    LibraryFamily("pool_matrix", "pool matrix exercises"),
    LibraryFamily("rotate_matrix", "rotate matrix exercises"),
    LibraryFamily("rotten_oranges", "rotten oranges exercises"),
    LibraryFamily("sentence_reordering", "sentence reordering tasks from text spans"),
    LibraryFamily("spell_backward", "tasks to spell words backward"),
    LibraryFamily("spiral_matrix", "spiral matrix exercises"),
    LibraryFamily("string_insertion", "string insertion exercises"),
    LibraryFamily("string_manipulation", "apply string rewriting rules until none applies"),
    LibraryFamily("string_splitting", "string splitting exercises"),
    LibraryFamily("string_synthesis", "string synthesis exercises"),
    LibraryFamily("word_sequence_reversal", "word sequence reversal tasks from text spans"),
    LibraryFamily("word_sorting", "word sorting tasks"),
]
