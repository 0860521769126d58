"""Competitive-programming families: read stdin, write stdout; Python, C and C++.

Each family has a Python ``solve(text) -> text`` that computes the expected outputs (and is
the Python oracle), plus C and C++ reference programs where the family offers them.
"""

from __future__ import annotations

import random

from llmgym.envs.coding.families.strings import WORDS
from llmgym.envs.coding.problem import scale, stdio_task
from llmgym.tasks import Family, Task

# --- sum of pairs -------------------------------------------------------------------------------


def solve_sum_pairs(text: str) -> str:
    data = text.split()
    t = int(data[0])
    return "".join(f"{int(data[1 + 2 * i]) + int(data[2 + 2 * i])}\n" for i in range(t))


_SUM_PAIRS_C = r"""
#include <stdio.h>
int main(void) {
    int t;
    if (scanf("%d", &t) != 1) return 0;
    while (t--) {
        long long a, b;
        scanf("%lld %lld", &a, &b);
        printf("%lld\n", a + b);
    }
    return 0;
}
"""
_SUM_PAIRS_CPP = r"""
#include <bits/stdc++.h>
int main() {
    std::ios::sync_with_stdio(false);
    std::cin.tie(nullptr);
    int t;
    if (!(std::cin >> t)) return 0;
    while (t--) {
        long long a, b;
        std::cin >> a >> b;
        std::cout << a + b << '\n';
    }
}
"""


def _sum_pairs(rng: random.Random, d: float) -> Task:
    cases, span = scale(d, 3, 500), 10 ** scale(d, 3, 17)

    def make() -> str:
        t = rng.randint(1, cases)
        rows = [f"{rng.randint(-span, span)} {rng.randint(-span, span)}" for _ in range(t)]
        return f"{t}\n" + "\n".join(rows) + "\n"

    return stdio_task(
        rng, d, solve=solve_sum_pairs, make=make, c_source=_SUM_PAIRS_C, cpp_source=_SUM_PAIRS_CPP,
        edge=["1\n0 0\n", "2\n-5 5\n100000000000000000 100000000000000000\n"],
        statement="The first line holds T, the number of test cases. Each of the next T lines "
        "holds two integers a and b (|a|, |b| <= 10^17). For each test case print a + b on "
        "its own line.",
    )  # fmt: skip


# --- maximum subarray ---------------------------------------------------------------------------


def solve_max_subarray(text: str) -> str:
    data = text.split()
    n = int(data[0])
    best = cur = int(data[1])
    for tok in data[2 : n + 1]:
        x = int(tok)
        cur = max(x, cur + x)
        best = max(best, cur)
    return f"{best}\n"


_MAX_SUBARRAY_C = r"""
#include <stdio.h>
int main(void) {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    long long best, cur, x;
    scanf("%lld", &x);
    best = cur = x;
    for (int i = 1; i < n; i++) {
        scanf("%lld", &x);
        cur = (cur + x > x) ? cur + x : x;
        if (cur > best) best = cur;
    }
    printf("%lld\n", best);
    return 0;
}
"""
_MAX_SUBARRAY_CPP = r"""
#include <bits/stdc++.h>
int main() {
    std::ios::sync_with_stdio(false);
    int n;
    if (!(std::cin >> n)) return 0;
    long long x, best, cur;
    std::cin >> x;
    best = cur = x;
    for (int i = 1; i < n; i++) {
        std::cin >> x;
        cur = std::max(x, cur + x);
        best = std::max(best, cur);
    }
    std::cout << best << "\n";
}
"""


def _max_subarray(rng: random.Random, d: float) -> Task:
    top, span = scale(d, 5, 5000), scale(d, 10, 10**9)

    def make() -> str:
        n = rng.randint(1, top)
        return f"{n}\n" + " ".join(str(rng.randint(-span, span)) for _ in range(n)) + "\n"

    return stdio_task(
        rng, d, solve=solve_max_subarray, make=make, c_source=_MAX_SUBARRAY_C,
        cpp_source=_MAX_SUBARRAY_CPP, edge=["1\n-7\n", "3\n-1 -2 -3\n", "4\n2 -1 2 -1\n"],
        statement="The first line holds n (1 <= n <= 5000), the second n integers "
        "(|a_i| <= 10^9). Print the largest sum of a non-empty contiguous block of them.",
    )  # fmt: skip


# --- range sum queries --------------------------------------------------------------------------


def solve_range_sums(text: str) -> str:
    data = text.split()
    n, q = int(data[0]), int(data[1])
    prefix = [0]
    for tok in data[2 : 2 + n]:
        prefix.append(prefix[-1] + int(tok))
    out = []
    pos = 2 + n
    for _ in range(q):
        left, right = int(data[pos]), int(data[pos + 1])
        pos += 2
        out.append(f"{prefix[right] - prefix[left - 1]}\n")
    return "".join(out)


_RANGE_SUMS_C = r"""
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    int n, q;
    if (scanf("%d %d", &n, &q) != 2) return 0;
    long long *prefix = malloc(sizeof(long long) * (n + 1));
    prefix[0] = 0;
    for (int i = 1; i <= n; i++) {
        long long x;
        scanf("%lld", &x);
        prefix[i] = prefix[i - 1] + x;
    }
    while (q--) {
        int l, r;
        scanf("%d %d", &l, &r);
        printf("%lld\n", prefix[r] - prefix[l - 1]);
    }
    free(prefix);
    return 0;
}
"""
_RANGE_SUMS_CPP = r"""
#include <bits/stdc++.h>
int main() {
    std::ios::sync_with_stdio(false);
    std::cin.tie(nullptr);
    int n, q;
    if (!(std::cin >> n >> q)) return 0;
    std::vector<long long> prefix(n + 1, 0);
    for (int i = 1; i <= n; i++) {
        long long x;
        std::cin >> x;
        prefix[i] = prefix[i - 1] + x;
    }
    while (q--) {
        int l, r;
        std::cin >> l >> r;
        std::cout << prefix[r] - prefix[l - 1] << '\n';
    }
}
"""


def _range_sums(rng: random.Random, d: float) -> Task:
    top = scale(d, 5, 3000)

    def make() -> str:
        n, q = rng.randint(1, top), rng.randint(1, top)
        nums = " ".join(str(rng.randint(-(10**9), 10**9)) for _ in range(n))
        queries = []
        for _ in range(q):
            a, b = sorted((rng.randint(1, n), rng.randint(1, n)))
            queries.append(f"{a} {b}")
        return f"{n} {q}\n{nums}\n" + "\n".join(queries) + "\n"

    return stdio_task(
        rng, d, solve=solve_range_sums, make=make, c_source=_RANGE_SUMS_C,
        cpp_source=_RANGE_SUMS_CPP, edge=["1 1\n5\n1 1\n", "3 2\n1 2 3\n1 3\n2 2\n"],
        statement="The first line holds n and q. The second holds n integers a_1..a_n "
        "(|a_i| <= 10^9). Each of the next q lines holds l and r (1 <= l <= r <= n). For each "
        "query print a_l + ... + a_r on its own line. n, q <= 3000.",
    )  # fmt: skip


# --- grid BFS -----------------------------------------------------------------------------------


def solve_grid_escape(text: str) -> str:
    from collections import deque

    lines = text.split("\n")
    rows, cols = (int(x) for x in lines[0].split())
    grid = lines[1 : 1 + rows]
    start = end = (0, 0)
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == "S":
                start = (r, c)
            elif grid[r][c] == "E":
                end = (r, c)
    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == end:
            return f"{dist[(r, c)]}\n"
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#" and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    return "-1\n"


_GRID_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    int rows, cols;
    if (scanf("%d %d", &rows, &cols) != 2) return 0;
    char *grid = malloc((size_t)rows * (cols + 2));
    int start = 0, end = 0;
    for (int r = 0; r < rows; r++) {
        scanf("%s", grid + (size_t)r * (cols + 2));
        for (int c = 0; c < cols; c++) {
            char ch = grid[(size_t)r * (cols + 2) + c];
            if (ch == 'S') start = r * cols + c;
            if (ch == 'E') end = r * cols + c;
        }
    }
    int *dist = malloc(sizeof(int) * rows * cols);
    int *queue = malloc(sizeof(int) * rows * cols);
    for (int i = 0; i < rows * cols; i++) dist[i] = -1;
    int head = 0, tail = 0;
    dist[start] = 0;
    queue[tail++] = start;
    int dr[4] = {1, -1, 0, 0}, dc[4] = {0, 0, 1, -1};
    while (head < tail) {
        int cell = queue[head++];
        int r = cell / cols, c = cell % cols;
        for (int k = 0; k < 4; k++) {
            int nr = r + dr[k], nc = c + dc[k];
            if (nr < 0 || nr >= rows || nc < 0 || nc >= cols) continue;
            if (grid[(size_t)nr * (cols + 2) + nc] == '#') continue;
            int next = nr * cols + nc;
            if (dist[next] != -1) continue;
            dist[next] = dist[cell] + 1;
            queue[tail++] = next;
        }
    }
    printf("%d\n", dist[end]);
    return 0;
}
"""
_GRID_CPP = r"""
#include <bits/stdc++.h>
int main() {
    int rows, cols;
    if (!(std::cin >> rows >> cols)) return 0;
    std::vector<std::string> grid(rows);
    int sr = 0, sc = 0, er = 0, ec = 0;
    for (int r = 0; r < rows; r++) {
        std::cin >> grid[r];
        for (int c = 0; c < cols; c++) {
            if (grid[r][c] == 'S') { sr = r; sc = c; }
            if (grid[r][c] == 'E') { er = r; ec = c; }
        }
    }
    std::vector<std::vector<int>> dist(rows, std::vector<int>(cols, -1));
    std::deque<std::pair<int, int>> queue;
    dist[sr][sc] = 0;
    queue.push_back({sr, sc});
    const int dr[4] = {1, -1, 0, 0}, dc[4] = {0, 0, 1, -1};
    while (!queue.empty()) {
        auto [r, c] = queue.front();
        queue.pop_front();
        for (int k = 0; k < 4; k++) {
            int nr = r + dr[k], nc = c + dc[k];
            if (nr < 0 || nr >= rows || nc < 0 || nc >= cols) continue;
            if (grid[nr][nc] == '#' || dist[nr][nc] != -1) continue;
            dist[nr][nc] = dist[r][c] + 1;
            queue.push_back({nr, nc});
        }
    }
    std::cout << dist[er][ec] << "\n";
}
"""


def _grid_escape(rng: random.Random, d: float) -> Task:
    size = scale(d, 3, 60)

    def make() -> str:
        rows, cols = rng.randint(1, size), rng.randint(2 if size > 1 else 1, size)
        cells = [["#" if rng.random() < 0.28 else "." for _ in range(cols)] for _ in range(rows)]
        spots = rng.sample([(r, c) for r in range(rows) for c in range(cols)], 2)
        (sr, sc), (er, ec) = spots
        cells[sr][sc], cells[er][ec] = "S", "E"
        return f"{rows} {cols}\n" + "\n".join("".join(row) for row in cells) + "\n"

    return stdio_task(
        rng, d, solve=solve_grid_escape, make=make, c_source=_GRID_C, cpp_source=_GRID_CPP,
        edge=["1 2\nSE\n", "1 3\nS#E\n", "3 3\nS.#\n#.#\n#.E\n"],
        statement="The first line holds R and C (R*C >= 2, both <= 60), then R lines of C "
        "characters: `.` open, `#` wall, exactly one `S` (start) and one `E` (exit). Moving "
        "up, down, left or right through non-wall cells, print the fewest moves from S to E, "
        "or -1 if E cannot be reached.",
    )  # fmt: skip


# --- word frequency -----------------------------------------------------------------------------


def solve_word_frequency(text: str) -> str:
    first, _, rest = text.partition("\n")
    k = int(first)
    counts: dict[str, int] = {}
    for word in rest.split():
        counts[word] = counts.get(word, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return "".join(f"{w} {c}\n" for w, c in ranked)


_WORD_FREQ_CPP = r"""
#include <bits/stdc++.h>
int main() {
    int k;
    if (!(std::cin >> k)) return 0;
    std::map<std::string, int> counts;
    std::string w;
    while (std::cin >> w) counts[w]++;
    std::vector<std::pair<int, std::string>> ranked;
    for (auto &kv : counts) ranked.push_back({-kv.second, kv.first});
    std::sort(ranked.begin(), ranked.end());
    for (int i = 0; i < k && i < (int)ranked.size(); i++)
        std::cout << ranked[i].second << " " << -ranked[i].first << "\n";
}
"""


def _word_frequency(rng: random.Random, d: float) -> Task:
    n, vocab = scale(d, 5, 3000), scale(d, 4, len(WORDS))

    def make() -> str:
        words = [rng.choice(WORDS[:vocab]) for _ in range(rng.randint(0, n))]
        lines, line = [], []
        for w in words:
            line.append(w)
            if rng.random() < 0.15:
                lines.append(" ".join(line))
                line = []
        lines.append(" ".join(line))
        return f"{rng.randint(1, 8)}\n" + "\n".join(lines) + "\n"

    return stdio_task(
        rng, d, solve=solve_word_frequency, make=make, cpp_source=_WORD_FREQ_CPP,
        compare={"mode": "lines"}, edge=["3\n\n", "1\nb a b a\n", "5\nx\n"],
        statement="The first line holds k. The rest of the input is text: words are maximal "
        "runs of non-whitespace characters (case-sensitive). Print the k most frequent words, "
        "one per line as `word count`, most frequent first; ties in ascending (byte-wise) "
        "alphabetical order. Print fewer lines if there are fewer than k distinct words.",
    )  # fmt: skip


# --- mean and standard deviation (float comparison) ---------------------------------------------


def solve_mean_std(text: str) -> str:
    data = text.split()
    n = int(data[0])
    xs = [float(x) for x in data[1 : n + 1]]
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / n
    return f"{mean:.6f} {var**0.5:.6f}\n"


_MEAN_STD_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
int main(void) {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    double *xs = malloc(sizeof(double) * n), sum = 0, var = 0;
    for (int i = 0; i < n; i++) { scanf("%lf", &xs[i]); sum += xs[i]; }
    double mean = sum / n;
    for (int i = 0; i < n; i++) var += (xs[i] - mean) * (xs[i] - mean);
    printf("%.6f %.6f\n", mean, sqrt(var / n));
    free(xs);
    return 0;
}
"""


def _mean_std(rng: random.Random, d: float) -> Task:
    top = scale(d, 3, 2000)

    def make() -> str:
        n = rng.randint(1, top)
        return f"{n}\n" + " ".join(f"{rng.uniform(-1000, 1000):.3f}" for _ in range(n)) + "\n"

    return stdio_task(
        rng, d, solve=solve_mean_std, make=make, c_source=_MEAN_STD_C,
        compare={"mode": "float", "abs_tol": 1e-4, "rel_tol": 1e-6},
        edge=["1\n5\n", "2\n-1 1\n", "4\n2.5 2.5 2.5 2.5\n"],
        statement="The first line holds n (>= 1), the second n real numbers. Print their mean "
        "and population standard deviation (divide by n), separated by a space. Answers within "
        "1e-4 absolute or 1e-6 relative error are accepted.",
    )  # fmt: skip


# --- any pair with a given sum (special judge) --------------------------------------------------


def solve_pair_sum(text: str) -> str:
    data = text.split()
    n, target = int(data[0]), int(data[1])
    seen: dict[int, int] = {}
    for j in range(n):
        x = int(data[2 + j])
        if target - x in seen:
            return f"{seen[target - x] + 1} {j + 1}\n"
        seen.setdefault(x, j)
    return "-1\n"


_PAIR_SUM_JUDGE = """\
def judge(input, output, expected):
    data = input.split()
    n, target = int(data[0]), int(data[1])
    nums = [int(x) for x in data[2:2 + n]]
    got = output.split()
    if expected.split() == ["-1"]:
        return got == ["-1"]
    if len(got) != 2:
        return False
    try:
        i, j = int(got[0]), int(got[1])
    except ValueError:
        return False
    return 1 <= i <= n and 1 <= j <= n and i != j and nums[i - 1] + nums[j - 1] == target
"""
_PAIR_SUM_CPP = r"""
#include <bits/stdc++.h>
int main() {
    int n;
    long long target;
    if (!(std::cin >> n >> target)) return 0;
    std::unordered_map<long long, int> seen;
    for (int j = 0; j < n; j++) {
        long long x;
        std::cin >> x;
        auto it = seen.find(target - x);
        if (it != seen.end()) {
            std::cout << it->second + 1 << " " << j + 1 << "\n";
            return 0;
        }
        seen.emplace(x, j);
    }
    std::cout << -1 << "\n";
}
"""


def _pair_sum(rng: random.Random, d: float) -> Task:
    top, span = scale(d, 4, 5000), scale(d, 20, 10**9)

    def make() -> str:
        n = rng.randint(2, top)
        nums = [rng.randint(-span, span) for _ in range(n)]
        target = (
            nums[rng.randrange(n)] + nums[rng.randrange(n)]
            if rng.random() < 0.8
            else rng.randint(-span, span)
        )
        return f"{n} {target}\n" + " ".join(map(str, nums)) + "\n"

    return stdio_task(
        rng, d, solve=solve_pair_sum, make=make, cpp_source=_PAIR_SUM_CPP, judge=_PAIR_SUM_JUDGE,
        edge=["2 3\n1 2\n", "2 4\n2 3\n", "3 0\n0 5 0\n"],
        statement="The first line holds n and S, the second n integers a_1..a_n. Print two "
        "different positions i and j (1-based) with a_i + a_j = S, or -1 if there are none. "
        "Any valid pair is accepted.",
    )  # fmt: skip


# --- passing students (unordered lines) ---------------------------------------------------------


def solve_passing(text: str) -> str:
    lines = text.strip("\n").split("\n")
    threshold = int(lines[0])
    return "".join(
        f"{name}\n"
        for name, score in (ln.split() for ln in lines[1:] if ln.strip())
        if int(score) >= threshold
    )


def _passing(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 500)

    def make() -> str:
        rows = [
            f"{w}{i}" for i, w in enumerate(rng.choice(WORDS) for _ in range(rng.randint(0, n)))
        ]
        return f"{rng.randint(0, 100)}\n" + "".join(
            f"{name} {rng.randint(0, 100)}\n" for name in rows
        )

    return stdio_task(
        rng, d, solve=solve_passing, make=make, compare={"mode": "unordered"},
        edge=["50\n", "0\nann 0\n", "100\nbob 99\n"],
        statement="The first line holds a passing threshold. Each following line holds a "
        "student's unique name and integer score. Print the name of every student whose score "
        "is at least the threshold, one per line, in any order.",
    )  # fmt: skip


FAMILIES = [
    Family("stdio_sum_pairs", _sum_pairs, "multi-case I/O (Python, C, C++)"),
    Family("stdio_max_subarray", _max_subarray, "Kadane on stdin (Python, C, C++)"),
    Family("stdio_range_sums", _range_sums, "prefix sums with queries (Python, C, C++)"),
    Family("stdio_grid_escape", _grid_escape, "grid BFS (Python, C, C++)"),
    Family("stdio_word_frequency", _word_frequency, "word counts (Python, C++)"),
    Family("stdio_mean_std", _mean_std, "float output with tolerance (Python, C)"),
    Family("stdio_pair_sum", _pair_sum, "any valid answer: special judge (Python, C++)"),
    Family("stdio_passing", _passing, "output lines in any order"),
]

LANGUAGES_BY_FAMILY: dict[str, tuple[str, ...]] = {
    "stdio_sum_pairs": ("python", "c", "cpp"),
    "stdio_max_subarray": ("python", "c", "cpp"),
    "stdio_range_sums": ("python", "c", "cpp"),
    "stdio_grid_escape": ("python", "c", "cpp"),
    "stdio_word_frequency": ("python", "cpp"),
    "stdio_mean_std": ("python", "c"),
    "stdio_pair_sum": ("python", "cpp"),
    "stdio_passing": ("python",),
}
"""The languages each family has reference programs for (the env's ``language`` filter)."""
