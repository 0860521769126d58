"""reasoning-gym's games datasets (puzzles and games), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("countdown", "countdown number game tasks"),
    LibraryFamily("emoji_mystery", "decode a sentence hidden in emoji variation selectors"),
    # level 4 of 4 takes seconds an item
    LibraryFamily("futoshiki", "futoshiki puzzles", levels=(0.0, 0.67)),
    LibraryFamily("kakurasu", "kakurasu puzzles"),
    LibraryFamily("mahjong_puzzle", "decide the result of a Mahjong hand after each draw"),
    LibraryFamily("maze", "mazes with guaranteed shortest path distance from start to goal"),
    LibraryFamily("mini_sudoku", "4x4 sudoku puzzles"),
    LibraryFamily("n_queens", "n queens puzzles"),
    # levels 1-3 of 14 (the smallest boards): the generator can loop for ever
    LibraryFamily("sokoban", "sokoban games", levels=(0.25, 1.0)),
    LibraryFamily("sudoku", "sudoku puzzles"),
    # levels 3-4 of 4 fail its config check (max_empty must be <= 9 on the smallest board)
    LibraryFamily(
        "survo", "fill a Survo grid so that rows and columns hit their sums", levels=(0.0, 0.4)
    ),
    LibraryFamily("tower_of_hanoi", "tower of hanoi problems with solutions"),
    LibraryFamily("tsumego", "find the capturing move in a Go problem"),
]
