"""Graph and tree families: islands, BFS, Dijkstra, topological order, components,
bipartiteness; tree depth, diameter, lowest common ancestor and level order."""

from __future__ import annotations

import random

from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task


def _grid(rng: random.Random, rows: int, cols: int, p: float) -> list[str]:
    return ["".join("#" if rng.random() < p else "." for _ in range(cols)) for _ in range(rows)]


def _edges(rng: random.Random, n: int, m: int) -> list[list[int]]:
    out = set()
    for _ in range(m):
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            out.add((min(a, b), max(a, b)))
    edges = [list(e) for e in sorted(out)]
    rng.shuffle(edges)
    return edges


# --- count_islands ------------------------------------------------------------------------------


def count_islands(grid: list[str]) -> int:
    rows = len(grid)
    cols = len(grid[0]) if rows else 0
    seen = [[False] * cols for _ in range(rows)]
    count = 0
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == "#" and not seen[r][c]:
                count += 1
                seen[r][c] = True
                stack = [(r, c)]
                while stack:
                    y, x = stack.pop()
                    for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                        if (
                            0 <= ny < rows
                            and 0 <= nx < cols
                            and grid[ny][nx] == "#"
                            and not seen[ny][nx]
                        ):
                            seen[ny][nx] = True
                            stack.append((ny, nx))
    return count


def _count_islands(rng: random.Random, d: float) -> Task:
    size = scale(d, 3, 80)
    return call_task(
        rng, d, fn=count_islands, theme="graphs",
        make=lambda: (_grid(rng, rng.randint(1, size), rng.randint(1, size), 0.3 + 0.2 * rng.random()),),
        edge=[([],), (["."],), (["#"],), (["#.#", ".#.", "#.#"],)],
        description="`grid` is a list of equal-length rows of `#` (land) and `.` (water). "
        "Count the islands: groups of land cells connected horizontally or vertically (not "
        "diagonally). An empty grid has none.",
    )  # fmt: skip


# --- shortest_grid_path -------------------------------------------------------------------------


def shortest_grid_path(grid: list[str]) -> int:
    from collections import deque

    rows, cols = len(grid), len(grid[0])
    if grid[0][0] == "#" or grid[-1][-1] == "#":
        return -1
    dist = {(0, 0): 0}
    queue = deque([(0, 0)])
    while queue:
        y, x = queue.popleft()
        if (y, x) == (rows - 1, cols - 1):
            return dist[(y, x)]
        for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
            if 0 <= ny < rows and 0 <= nx < cols and grid[ny][nx] == "." and (ny, nx) not in dist:
                dist[(ny, nx)] = dist[(y, x)] + 1
                queue.append((ny, nx))
    return -1


def _shortest_grid_path(rng: random.Random, d: float) -> Task:
    size = scale(d, 3, 120)
    return call_task(
        rng, d, fn=shortest_grid_path, theme="graphs",
        make=lambda: (_grid(rng, rng.randint(1, size), rng.randint(1, size), 0.15 + 0.2 * rng.random()),),
        edge=[(["."],), (["#"],), ([".#", "#."],), (["...", "##.", "..."],)],
        description="`grid` is a non-empty list of equal-length rows of `.` (open) and `#` "
        "(wall). Return the fewest moves (up, down, left, right through open cells) from the "
        "top-left to the bottom-right cell, or -1 if it cannot be reached.",
    )  # fmt: skip


# --- dijkstra_distances -------------------------------------------------------------------------


def dijkstra_distances(n: int, edges: list[list[int]], source: int) -> list[int]:
    import heapq

    graph: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, w in edges:
        graph[a].append((b, w))
    dist = [-1] * n
    heap = [(0, source)]
    while heap:
        dd, u = heapq.heappop(heap)
        if dist[u] != -1:
            continue
        dist[u] = dd
        for v, w in graph[u]:
            if dist[v] == -1:
                heapq.heappush(heap, (dd + w, v))
    return dist


def _dijkstra_distances(rng: random.Random, d: float) -> Task:
    top = scale(d, 4, 500)

    def make() -> tuple[int, list[list[int]], int]:
        n = rng.randint(1, top)
        m = rng.randint(0, 3 * n)
        edges = [
            [rng.randrange(n), rng.randrange(n), rng.randint(0, scale(d, 9, 10**6))]
            for _ in range(m)
        ]
        return n, edges, rng.randrange(n)

    return call_task(
        rng, d, fn=dijkstra_distances, make=make, theme="graphs",
        edge=[(1, [], 0), (2, [[0, 1, 5]], 1), (3, [[0, 1, 5], [0, 2, 1], [2, 1, 1]], 0)],
        description="A directed graph has nodes `0..n-1`; `edges` lists `[from, to, weight]` "
        "with non-negative weights (parallel edges and self-loops may occur). Return the "
        "shortest distance from `source` to every node, -1 for unreachable nodes.",
    )  # fmt: skip


# --- topological_order --------------------------------------------------------------------------


def topological_order(n: int, edges: list[list[int]]) -> list[int]:
    import heapq

    indegree = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        out[a].append(b)
        indegree[b] += 1
    ready = [v for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for w in out[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                heapq.heappush(ready, w)
    return order if len(order) == n else []


_TOPO_JUDGE = """\
def judge(args, result, expected):
    n, edges = args
    if expected == []:
        return result == []
    if not isinstance(result, (list, tuple)) or sorted(result) != list(range(n)):
        return False
    position = {v: i for i, v in enumerate(result)}
    return all(position[a] < position[b] for a, b in edges)
"""


def _topological_order(rng: random.Random, d: float) -> Task:
    top = scale(d, 3, 1000)

    def make() -> tuple[int, list[list[int]]]:
        n = rng.randint(1, top)
        perm = list(range(n))
        rng.shuffle(perm)
        edges = []
        for _ in range(rng.randint(0, 2 * n)):
            i, j = sorted(rng.sample(range(n), 2)) if n > 1 else (0, 0)
            if i != j:
                edges.append([perm[i], perm[j]])
        if n > 2 and rng.random() < 0.2:
            edges.append([edges[0][1], edges[0][0]] if edges else [0, 1])
            edges.append([1, 0])
        return n, edges

    return call_task(
        rng, d, fn=topological_order, make=make, judge=_TOPO_JUDGE, theme="graphs",
        edge=[(1, []), (2, [[0, 1], [1, 0]]), (3, [[2, 1], [1, 0]])],
        description="A directed graph has nodes `0..n-1` and edges `[a, b]` (a must come "
        "before b). Return an ordering of all `n` nodes in which every edge points forward, "
        "or `[]` if the graph has a cycle. Any valid ordering is accepted.",
    )  # fmt: skip


# --- count_components ---------------------------------------------------------------------------


def count_components(n: int, edges: list[list[int]]) -> int:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    count = n
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            count -= 1
    return count


def _count_components(rng: random.Random, d: float) -> Task:
    top = scale(d, 3, 1500)

    def make() -> tuple[int, list[list[int]]]:
        n = rng.randint(1, top)
        return n, _edges(rng, n, rng.randint(0, n))

    return call_task(
        rng, d, fn=count_components, make=make, theme="graphs",
        edge=[(1, []), (4, []), (3, [[0, 1], [1, 2], [2, 0]])],
        description="An undirected graph has nodes `0..n-1` and the edges `[a, b]` in "
        "`edges`. Return its number of connected components.",
    )  # fmt: skip


# --- is_bipartite -------------------------------------------------------------------------------


def is_bipartite(n: int, edges: list[list[int]]) -> bool:
    graph: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        graph[a].append(b)
        graph[b].append(a)
    color = [-1] * n
    for start in range(n):
        if color[start] != -1:
            continue
        color[start] = 0
        stack = [start]
        while stack:
            u = stack.pop()
            for v in graph[u]:
                if color[v] == -1:
                    color[v] = 1 - color[u]
                    stack.append(v)
                elif color[v] == color[u]:
                    return False
    return True


def _is_bipartite(rng: random.Random, d: float) -> Task:
    top = scale(d, 6, 2000)  # from 6 nodes: enough distinct graphs of both answers

    def make() -> tuple[int, list[list[int]]]:
        n = rng.randint(2, max(2, top))
        if rng.random() < 0.5:  # bipartite by construction
            side = [rng.randint(0, 1) for _ in range(n)]
            edges = [e for e in _edges(rng, n, 2 * n) if side[e[0]] != side[e[1]]]
        else:
            edges = _edges(rng, n, rng.randint(1, n))
        return n, edges

    return call_task(
        rng, d, fn=is_bipartite, make=make, theme="graphs",
        edge=[(2, []), (3, [[0, 1], [1, 2], [2, 0]]), (4, [[0, 1], [1, 2], [2, 3], [3, 0]])],
        description="An undirected graph has nodes `0..n-1` and edges `[a, b]`. Return True "
        "if its nodes can be split into two groups with every edge joining the groups.",
    )  # fmt: skip


# --- trees --------------------------------------------------------------------------------------


def _random_parents(rng: random.Random, n: int, chainy: float) -> list[int]:
    parents = [-1]
    for v in range(1, n):
        parents.append(v - 1 if rng.random() < chainy else rng.randrange(v))
    return parents


def tree_height(parents: list[int]) -> int:
    children: list[list[int]] = [[] for _ in parents]
    root = 0
    for v, p in enumerate(parents):
        if p == -1:
            root = v
        else:
            children[p].append(v)
    height = 0
    stack = [(root, 0)]
    while stack:
        v, depth = stack.pop()
        height = max(height, depth)
        stack.extend((c, depth + 1) for c in children[v])
    return height


def _relabel(rng: random.Random, parents: list[int]) -> list[int]:
    n = len(parents)
    perm = list(range(n))
    rng.shuffle(perm)
    out = [0] * n
    for v, p in enumerate(parents):
        out[perm[v]] = -1 if p == -1 else perm[p]
    return out


def _tree_height(rng: random.Random, d: float) -> Task:
    top = scale(d, 3, 1500)
    return call_task(
        rng, d, fn=tree_height, theme="trees",
        make=lambda: (_relabel(rng, _random_parents(rng, rng.randint(1, top), rng.random())),),
        edge=[([-1],), ([-1, 0],), ([1, -1, 1],), ([-1, 0, 1, 2, 3],)],
        description="A rooted tree on nodes `0..n-1` is given by `parents`: `parents[v]` is "
        "the parent of `v`, and -1 marks the single root. Return its height: the number of "
        "edges on the longest path from the root down to a leaf (0 for a single node). The "
        "tree may be a long chain: avoid deep recursion.",
    )  # fmt: skip


def tree_diameter(n: int, edges: list[list[int]]) -> int:
    graph: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        graph[a].append(b)
        graph[b].append(a)

    def farthest(start: int) -> tuple[int, int]:
        dist = [-1] * n
        dist[start] = 0
        stack = [start]
        while stack:
            u = stack.pop()
            for v in graph[u]:
                if dist[v] == -1:
                    dist[v] = dist[u] + 1
                    stack.append(v)
        best = max(range(n), key=lambda v: dist[v])
        return best, dist[best]

    far, _ = farthest(0)
    return farthest(far)[1]


def _tree_diameter(rng: random.Random, d: float) -> Task:
    top = scale(d, 8, 1500)  # from 8 nodes: diameters 1..7, no answer dominates the tests

    def make() -> tuple[int, list[list[int]]]:
        parents = _relabel(rng, _random_parents(rng, rng.randint(1, top), rng.random() * 0.8))
        edges = [[v, p] if rng.random() < 0.5 else [p, v] for v, p in enumerate(parents) if p != -1]
        rng.shuffle(edges)
        return len(parents), edges

    return call_task(
        rng, d, fn=tree_diameter, make=make, theme="trees",
        edge=[(1, []), (2, [[1, 0]]), (4, [[0, 1], [0, 2], [0, 3]])],
        description="An undirected tree has nodes `0..n-1` and `n - 1` edges `[a, b]`. Return "
        "its diameter: the number of edges on the longest path between two nodes.",
    )  # fmt: skip


def lowest_common_ancestor(parents: list[int], a: int, b: int) -> int:
    ancestors = set()
    while a != -1:
        ancestors.add(a)
        a = parents[a]
    while b not in ancestors:
        b = parents[b]
    return b


def _lowest_common_ancestor(rng: random.Random, d: float) -> Task:
    top = scale(d, 3, 1500)

    def make() -> tuple[list[int], int, int]:
        parents = _relabel(rng, _random_parents(rng, rng.randint(1, top), rng.random() * 0.7))
        n = len(parents)
        return parents, rng.randrange(n), rng.randrange(n)

    return call_task(
        rng, d, fn=lowest_common_ancestor, make=make, theme="trees",
        edge=[([-1], 0, 0), ([-1, 0, 0], 1, 2), ([-1, 0, 1], 2, 1)],
        description="A rooted tree is given by `parents` (`parents[v]` is the parent of `v`, "
        "-1 for the root). Return the lowest common ancestor of nodes `a` and `b`: the deepest "
        "node that is an ancestor of both (a node is its own ancestor).",
    )  # fmt: skip


def level_order(tree: list[int | None]) -> list[list[int]]:
    # tree is a heap-style list: the children of index i sit at 2i+1 and 2i+2.
    levels: list[list[int]] = []
    frontier = [0] if tree and tree[0] is not None else []
    while frontier:
        levels.append([v for i in frontier if (v := tree[i]) is not None])
        nxt = []
        for i in frontier:
            for c in (2 * i + 1, 2 * i + 2):
                if c < len(tree) and tree[c] is not None:
                    nxt.append(c)
        frontier = nxt
    return levels


def _level_order(rng: random.Random, d: float) -> Task:
    top = scale(d, 3, 500)

    def make() -> tuple[list[int | None]]:
        size = rng.randint(0, top)
        tree: list[int | None] = []
        for i in range(size):
            parent_present = i == 0 or tree[(i - 1) // 2] is not None
            tree.append(rng.randint(-99, 99) if parent_present and rng.random() < 0.8 else None)
        while tree and tree[-1] is None:
            tree.pop()
        return (tree,)

    return call_task(
        rng, d, fn=level_order, make=make, theme="trees",
        edge=[([],), ([None],), ([1],), ([1, None, 3, None, None, 6],)],
        description="A binary tree is stored heap-style in `tree`: the root at index 0 and the "
        "children of index `i` at `2*i + 1` and `2*i + 2`; `None` marks a missing node (its "
        "subtree is empty too). Return the node values level by level, left to right, as a "
        "list of lists (no empty levels).",
    )  # fmt: skip


FAMILIES = [
    Family("count_islands", _count_islands, "flood fill"),
    Family("shortest_grid_path", _shortest_grid_path, "breadth-first search on a grid"),
    Family("dijkstra_distances", _dijkstra_distances, "shortest paths with a heap"),
    Family("topological_order", _topological_order, "topological sort (special judge)"),
    Family("count_components", _count_components, "union-find"),
    Family("is_bipartite", _is_bipartite, "two-colouring"),
    Family("tree_height", _tree_height, "tree depth from a parent array"),
    Family("tree_diameter", _tree_diameter, "tree diameter by two searches"),
    Family("lowest_common_ancestor", _lowest_common_ancestor, "ancestor sets"),
    Family("level_order", _level_order, "binary tree level order"),
]
