"""The topology graph's layered layout (daemons/reports/layout.py): columns follow the data flow,
cycles do not break it, rows are unique per column and few edges cross."""

from daemons.reports.layout import crossings, layers, layout


def test_word_count_columns_follow_the_flow():
    edges = [("sentences", "split"), ("split", "count"), ("count", "sink")]
    assert layers(["sink", "count", "split", "sentences"], edges) == {
        "sentences": 0, "split": 1, "count": 2, "sink": 3}


def test_longest_path_decides_the_column():
    edges = [("s", "a"), ("a", "b"), ("s", "b")]
    assert layers(["s", "a", "b"], edges) == {"s": 0, "a": 1, "b": 2}


def test_a_cycle_is_broken_not_looped():
    edges = [("s", "a"), ("a", "b"), ("b", "a"), ("b", "b")]
    got = layers(["s", "a", "b"], edges)
    assert got["s"] == 0 and got["a"] == 1 and got["b"] == 2


def test_a_cycle_without_a_source_still_gets_columns():
    got = layers(["x", "y", "z"], [("x", "y"), ("y", "z"), ("z", "x")])
    assert sorted(got.values()) == [0, 1, 2]


def test_unknown_endpoints_and_isolated_nodes():
    assert layout(["a", "lonely"], [("a", "ghost"), ("ghost", "a")]) == {"a": (0, 0), "lonely": (0, 1)}


def test_rows_are_unique_per_column_with_thirty_components():
    names = [f"c{i:02d}" for i in range(30)]
    # five spouts fanning into five layers of five bolts, each bolt fed by two of the previous layer
    edges = []
    for layer in range(1, 6):
        for i in range(5):
            dst = names[layer * 5 + i]
            edges += [(names[(layer - 1) * 5 + i], dst), (names[(layer - 1) * 5 + (i + 3) % 5], dst)]
    pos = layout(names, edges)
    assert set(pos) == set(names)
    assert sorted({p[0] for p in pos.values()}) == [0, 1, 2, 3, 4, 5]
    for col in range(6):
        rows = sorted(r for c, r in pos.values() if c == col)
        assert rows == list(range(len(rows)))


def test_ordering_removes_avoidable_crossings():
    # Names deliberately in the wrong order: b1 feeds z-bolt, b2 feeds a-bolt.
    edges = [("s", "b1"), ("s", "b2"), ("b1", "z"), ("b2", "a")]
    pos = layout(["s", "b1", "b2", "a", "z"], edges)
    assert crossings(pos, edges) == 0


def test_layout_is_stable():
    edges = [("s", "a"), ("s", "b"), ("a", "c"), ("b", "c")]
    assert layout(["s", "a", "b", "c"], edges) == layout(["c", "b", "a", "s"], list(reversed(edges)))
