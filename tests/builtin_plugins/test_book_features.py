"""The book_features plugin: each family against a float64 loop reference on hand-made and random books, its
hooks through the host's explicit registration, and a DBN round trip through databento-dbn's own encoder."""

from __future__ import annotations

import math

import databento_dbn as db
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt import FoxhuntError
from foxhunt.data import BOOK, BOOK_LEVELS, FLOW, LEVEL, OHLCV, MarketData, load, preset
from foxhunt.errors import DataError
from foxhunt.features import FeatureTable, compute_features
from foxhunt.features.library import feature_values, parse_feature
from foxhunt.testing import make_host
from foxhunt_plugins import book_features
from foxhunt_plugins.book_features import HAWKES_WARMUP_SPANS
from dbn_writers import MINUTE, SCALE, T0, book_levels, px, write
from market_builders import with_book

TABLE, _ = FeatureTable.compose([("book_features", f) for f in book_features.FAMILIES],
                                [("book_features", book_features.BOOK_FULL)])


def market_of(close, levels, buy, sell, trades) -> MarketData:
    """A market from per-bar columns and books ``levels [bars, BOOK_LEVELS, LEVEL]`` (BOOK is their summary; the
    bars' other prices follow the close)."""
    close, levels = np.asarray(close, dtype=np.float64), np.asarray(levels, dtype=np.float64)
    n = close.size
    ohlcv = np.column_stack([close, close, close, close, np.asarray(buy, float) + np.asarray(sell, float)])
    book = np.zeros((n, BOOK.size()))
    book[:, BOOK.BID_PRICE], book[:, BOOK.ASK_PRICE] = levels[:, 0, LEVEL.BID_PRICE], levels[:, 0, LEVEL.ASK_PRICE]
    book[:, BOOK.BID_SIZE], book[:, BOOK.ASK_SIZE] = levels[:, 0, LEVEL.BID_SIZE], levels[:, 0, LEVEL.ASK_SIZE]
    book[:, BOOK.BID_DEPTH] = levels[:, :, LEVEL.BID_SIZE].sum(axis=1)
    book[:, BOOK.ASK_DEPTH] = levels[:, :, LEVEL.ASK_SIZE].sum(axis=1)
    flow = np.zeros((n, FLOW.size()))
    flow[:, FLOW.BUY_VOLUME], flow[:, FLOW.SELL_VOLUME], flow[:, FLOW.TRADES] = buy, sell, trades
    stamps = np.datetime64("2024-01-02T09:30", "ns") + np.arange(n) * np.timedelta64(1, "m")
    return MarketData("hand-made", stamps, ohlcv, preset("ES"), book=book, flow=flow, levels=levels)


def random_levels(rng: np.random.Generator, close: np.ndarray) -> np.ndarray:
    """Books around each close: bid and ask a random number of ticks away, random sizes (0 included), and now and
    then an empty level (price NaN, size 0) at the back."""
    n = close.size
    levels = np.empty((n, BOOK_LEVELS, LEVEL.size()))
    steps = 0.25 * np.cumsum(rng.integers(1, 3, (n, BOOK_LEVELS)), axis=1)
    levels[:, :, LEVEL.BID_PRICE] = np.round(close[:, None] / 0.25) * 0.25 - steps
    levels[:, :, LEVEL.ASK_PRICE] = np.round(close[:, None] / 0.25) * 0.25 + steps
    levels[:, :, LEVEL.BID_SIZE] = rng.integers(0, 30, (n, BOOK_LEVELS))
    levels[:, :, LEVEL.ASK_SIZE] = rng.integers(0, 30, (n, BOOK_LEVELS))
    empty = rng.random(n) < 0.2
    levels[empty, -1, LEVEL.BID_PRICE], levels[empty, -1, LEVEL.BID_SIZE] = np.nan, 0.0
    return levels


def ratio(a: float, b: float) -> float:
    return a / b if b != 0 else 0.0


# -- float64 references, one bar at a time, written from the formulas in docs/data.md -----------------------
def reference(market: MarketData, base: str, *p: int) -> tuple[list[float], int]:
    book, flow, n, lv = market.book, market.flow, len(market), market.levels.tolist()
    qb, qa = book[:, BOOK.BID_SIZE].tolist(), book[:, BOOK.ASK_SIZE].tolist()
    db_, da = book[:, BOOK.BID_DEPTH].tolist(), book[:, BOOK.ASK_DEPTH].tolist()
    buy, sell, trades = flow[:, FLOW.BUY_VOLUME].tolist(), flow[:, FLOW.SELL_VOLUME].tolist(), flow[:, FLOW.TRADES].tolist()
    close = market.close.tolist()
    out = [math.nan] * n
    if base == "deep_imbalance":
        for t in range(n):
            deep_b, deep_a = db_[t] - qb[t], da[t] - qa[t]
            out[t] = ratio(deep_b - deep_a, deep_b + deep_a)
        return out, 0
    k = p[0]
    bp, ap, bs, as_ = LEVEL.BID_PRICE, LEVEL.ASK_PRICE, LEVEL.BID_SIZE, LEVEL.ASK_SIZE
    if base == "lvl_imb":
        return [ratio(lv[t][k - 1][bs] - lv[t][k - 1][as_], lv[t][k - 1][bs] + lv[t][k - 1][as_]) for t in range(n)], 0
    if base == "cdi":
        for t in range(n):
            bid, ask = sum(lv[t][m][bs] for m in range(k)), sum(lv[t][m][as_] for m in range(k))
            out[t] = ratio(bid - ask, bid + ask)
        return out, 0
    if base == "mlofi":
        h = p[1]

        def e(t: int, m: int) -> float:  # Cont-Kukanov-Stoikov at level m between the closes of bars t - 1 and t
            now, before = lv[t][m], lv[t - 1][m]
            return ((now[bs] if now[bp] >= before[bp] else 0.0) - (before[bs] if now[bp] <= before[bp] else 0.0)
                    - (now[as_] if now[ap] <= before[ap] else 0.0) + (before[as_] if now[ap] >= before[ap] else 0.0))

        for t in range(h, n):
            window = range(t - h + 1, t + 1)
            flow_sum = sum(e(s, m) for s in window for m in range(k))
            out[t] = flow_sum / max(1.0, sum((lv[s][m][bs] + lv[s][m][as_]) / 2 for s in window for m in range(k)))
        return out, h
    if base == "qdep":
        for t in range(k, n):
            out[t] = math.log((1 + qb[t]) / (1 + qb[t - k])) - math.log((1 + qa[t]) / (1 + qa[t - k]))
        return out, k
    if base == "aggr":
        for t in range(k - 1, n):
            window = range(t - k + 1, t + 1)
            lift = ratio(sum(buy[s] for s in window), sum(qa[s] for s in window))
            hit = ratio(sum(sell[s] for s in window), sum(qb[s] for s in window))
            out[t] = math.log(1 + lift) - math.log(1 + hit)
        return out, k - 1
    if base in ("hawkes", "hawkes_imb"):
        decay = math.exp(-1 / k)
        lam = lam_b = lam_s = 0.0
        for t in range(n):
            lam, lam_b, lam_s = decay * lam + trades[t], decay * lam_b + buy[t], decay * lam_s + sell[t]
            out[t] = math.log(1 + (1 - decay) * lam) if base == "hawkes" else ratio(lam_b - lam_s, lam_b + lam_s)
        warmup = HAWKES_WARMUP_SPANS * k
        return [math.nan] * warmup + out[warmup:], warmup
    m = p[1]  # mtf_*: the last completed k-bar block J at bar t ends at bar (J + 1) k - 1
    for t in range(n):
        last = (t + 1) // k - 1
        if last < m:
            continue
        end = [math.log(close[(j + 1) * k - 1]) for j in range(last - m, last + 1)]
        if base == "mtf_ret":
            out[t] = end[-1] - end[0]
        else:
            out[t] = math.sqrt(sum((b - a) ** 2 for a, b in zip(end, end[1:])) / (m * k))
    return out, (m + 1) * k - 1


def check_against_reference(market: MarketData, name: str) -> None:
    feature, params = parse_feature(name, TABLE.families)
    values, warmup = feature_values(market, name, TABLE.families)
    expected, expected_warmup = reference(market, feature.base, *params)
    assert warmup == expected_warmup
    assert np.isnan(values[:warmup]).all()
    np.testing.assert_allclose(values[warmup:], expected[warmup:], rtol=1e-10, atol=1e-12)


NAMES = ("deep_imbalance", "lvl_imb_1", "lvl_imb_10", "cdi_1", "cdi_4", "mlofi_1_1", "mlofi_3_2", "mlofi_10_5", "qdep_1", "qdep_2", "aggr_1", "aggr_3", "hawkes_1", "hawkes_2",
         "hawkes_imb_1", "hawkes_imb_2", "mtf_ret_1_1", "mtf_ret_2_2", "mtf_ret_3_1", "mtf_rvol_1_2", "mtf_rvol_2_2")


def test_every_family_has_a_reference_case() -> None:
    assert {parse_feature(name, TABLE.families)[0].base for name in NAMES} == {f.base for f in book_features.FAMILIES}


def hand_made_levels(bid, ask, qb, qa, db_, da) -> np.ndarray:
    """Ten levels a quarter apart from the best quotes; the best sizes given, the rest of each side's depth
    split evenly over levels 2-10 (the remainder at level 2)."""
    levels = np.empty((len(bid), BOOK_LEVELS, LEVEL.size()))
    ticks = 0.25 * np.arange(BOOK_LEVELS)
    levels[:, :, LEVEL.BID_PRICE] = np.asarray(bid, float)[:, None] - ticks
    levels[:, :, LEVEL.ASK_PRICE] = np.asarray(ask, float)[:, None] + ticks
    for side, best, depth in ((LEVEL.BID_SIZE, qb, db_), (LEVEL.ASK_SIZE, qa, da)):
        levels[:, 0, side] = best
        rest = np.asarray(depth) - np.asarray(best)
        levels[:, 1:, side] = (rest // 9)[:, None]
        levels[:, 1, side] += rest % 9
    return levels


CLOSE = [100, 101, 99, 102, 102, 104, 103, 105, 104, 106, 107, 105]
HAND_MADE = market_of(
    close=CLOSE,
    levels=hand_made_levels(
        bid=[c - 0.25 for c in CLOSE[:3]] + [101.75, 101.75, 103.75, 102.75, 104.75, 103.75, 105.75, 106.75, 104.75],
        ask=[c + 0.25 for c in CLOSE[:3]] + [102.25, 102.25, 104.25, 103.25, 105.25, 104.25, 106.25, 107.25, 105.25],
        qb=[10, 8, 0, 5, 12, 3, 7, 7, 9, 2, 4, 6], qa=[9, 0, 4, 6, 6, 11, 2, 8, 5, 5, 10, 3],
        db_=[50, 44, 30, 35, 60, 41, 48, 52, 49, 40, 45, 47], da=[45, 30, 33, 38, 40, 56, 39, 51, 44, 47, 50, 42],
    ),
    buy=[3, 0, 5, 0, 2, 7, 1, 0, 4, 6, 2, 0], sell=[1, 0, 2, 6, 0, 3, 0, 0, 5, 1, 3, 2],
    trades=[2, 0, 3, 4, 1, 5, 1, 0, 6, 3, 2, 1],
)


@pytest.mark.parametrize("name", NAMES)
def test_hand_made_book_matches_the_reference(name: str) -> None:
    check_against_reference(HAND_MADE, name)


def test_hand_made_values_worked_by_hand() -> None:
    """A few values computed on paper, so the reference itself is checked."""
    values = {name: feature_values(HAND_MADE, name, TABLE.families)[0] for name in
              ("deep_imbalance", "qdep_1", "aggr_1", "mtf_ret_2_2", "lvl_imb_2", "cdi_2", "mlofi_1_1")}
    assert values["deep_imbalance"][0] == pytest.approx((40 - 36) / (40 + 36))
    assert values["qdep_1"][1] == pytest.approx(np.log(9 / 11) - np.log(1 / 10))
    assert values["aggr_1"][1] == 0.0  # no trades against an empty ask: both ratios are 0
    assert values["aggr_1"][2] == pytest.approx(np.log1p(5 / 4))  # sells against an empty bid queue count 0
    # bar 5 closes block 2 (bars 4-5); two blocks back ends at bar 1
    assert values["mtf_ret_2_2"][5] == pytest.approx(np.log(104 / 101))
    assert values["mtf_ret_2_2"][6] == pytest.approx(np.log(104 / 101))  # block 3 is not complete at bar 6
    # level 2 holds (depth - best) // 9 plus the remainder: bar 0 bid 40 -> 4 + 4 = 8, ask 36 -> 4 + 0 = 4
    assert values["lvl_imb_2"][0] == pytest.approx((8 - 4) / (8 + 4))
    assert values["cdi_2"][0] == pytest.approx((10 + 8 - 9 - 4) / (10 + 8 + 9 + 4))
    # bar 1: bid up (100.75 from 99.75): + qb_1 = 8; ask up (101.25 from 100.25): + qa_0 = 9
    assert values["mlofi_1_1"][1] == pytest.approx((8 + 9) / ((8 + 0) / 2))


@settings(max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(NAMES + ("mlofi_10_16", "hawkes_8", "mtf_rvol_5_3")))
def test_random_books_match_the_reference(seed: int, name: str) -> None:
    rng = np.random.default_rng(seed)
    n = 90
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    check_against_reference(market_of(
        close=close, levels=random_levels(rng, close),
        buy=rng.integers(0, 50, n) * rng.integers(0, 2, n), sell=rng.integers(0, 50, n), trades=rng.integers(0, 9, n),
    ), name)


def test_the_hooks_reach_the_run_through_the_host() -> None:
    host = make_host((book_features, "book_features"))
    host.declare()
    host.freeze()
    table = host.feature_table(None)
    assert {f.base for f in book_features.FAMILIES} <= set(table.families)
    assert table.owner("hawkes_imb_8") == "book_features" and table.owner("ret_1") == "foxhunt"
    market = with_book(load("synthetic:regime?bars=200&seed=2"), 1)
    matrix = compute_features(market, "book_full", table=table)
    assert matrix.names == book_features.BOOK_FULL.names
    assert matrix.warmup == 79  # mtf_*_16_4: five 16-bar blocks
    assert matrix.parity == table.parity(matrix.names)


# -- a DBN round trip: MBP-10 events written with databento-dbn's encoder, loaded, features computed ----------
def events(n_minutes: int, seed: int) -> list[tuple]:
    """(seconds, action, side, size, bid, ask, bid size, ask size), a few per minute, a trade in most."""
    rng = np.random.default_rng(seed)
    mid, rows = 4700.0, []
    for minute in range(n_minutes):
        for second in sorted(rng.choice(60, size=3, replace=False)):
            mid += 0.25 * rng.integers(-2, 3)
            trade = rng.random() < 0.6
            side = db.Side.ASK if rng.random() < 0.5 else db.Side.BID
            rows.append((minute * 60 + int(second), db.Action.TRADE if trade else db.Action.ADD, side,
                         int(rng.integers(1, 20)) if trade else 0, mid - 0.25, mid + 0.25,
                         int(rng.integers(1, 40)), int(rng.integers(1, 40))))
    return rows


def test_dbn_round_trip_matches_features_of_the_events(tmp_path) -> None:
    rows = events(40, seed=3)
    records = [
        db.MBP10Msg(1, 42, T0 + s * SCALE, px(b if side == db.Side.BID else a), size, action, side, 0, T0 + s * SCALE,
                    levels=book_levels(b, a, qb, qa))
        for s, action, side, size, b, a, qb, qa in rows
    ]  # fmt: skip
    market = load(str(write(tmp_path / "book.dbn", db.Schema.MBP_10, records)), bar="1m")
    assert len(market) == 40
    # each bar's close state and flow, straight from the events (book_levels: level i at bid - i/4 and ask + i/4,
    # sizes q + i and q + 2 i)
    last = {row[0] // 60: row for row in rows}
    close = [(last[m][4] + last[m][5]) / 2 for m in range(40)]
    i = np.arange(BOOK_LEVELS)
    levels = np.stack([np.stack([last[m][4] - 0.25 * i, last[m][5] + 0.25 * i, last[m][6] + i, last[m][7] + 2 * i],
                                axis=1) for m in range(40)])
    # a trade's side is its aggressor's: BID a buy, ASK a sell
    buy = [sum(r[3] for r in rows if r[0] // 60 == m and r[1] == db.Action.TRADE and r[2] == db.Side.BID) for m in range(40)]
    sell = [sum(r[3] for r in rows if r[0] // 60 == m and r[1] == db.Action.TRADE and r[2] == db.Side.ASK) for m in range(40)]
    trades = [sum(1 for r in rows if r[0] // 60 == m and r[1] == db.Action.TRADE) for m in range(40)]
    from_events = market_of(close, levels, buy, sell, trades)
    np.testing.assert_allclose(market.close, close)
    np.testing.assert_allclose(market.ohlcv[:, OHLCV.VOLUME], np.add(buy, sell))
    for name in ("deep_imbalance", "lvl_imb_3", "cdi_10", "mlofi_5_4", "qdep_2", "aggr_4", "hawkes_3", "hawkes_imb_3", "mtf_ret_4_2", "mtf_rvol_4_2"):
        loaded, warmup = feature_values(market, name, TABLE.families)
        expected, _ = feature_values(from_events, name, TABLE.families)
        np.testing.assert_allclose(loaded[warmup:], expected[warmup:], rtol=1e-12, err_msg=name)
        assert np.isfinite(loaded[warmup:]).all() and np.abs(loaded[warmup:]).max() > 0, name
    # the levels agree with the loader's BOOK summary: the best level's and the ten levels' imbalances
    for name, core in (("lvl_imb_1", "book_pressure"), ("cdi_10", "depth_imbalance")):
        np.testing.assert_allclose(feature_values(market, name, TABLE.families)[0], feature_values(market, core)[0])
    assert T0 % MINUTE == 0  # the bars start on a minute, as the per-minute grouping above assumes


def test_a_depth_beyond_the_ten_levels_is_refused() -> None:
    with pytest.raises(FoxhuntError, match="an MBP-10 book has 10 levels, so d must be 1 to 10"):
        feature_values(HAND_MADE, "cdi_11", TABLE.families)
    with pytest.raises(DataError, match="needs each level of an MBP-10 book"):
        without = MarketData("no levels", HAND_MADE.timestamps, HAND_MADE.ohlcv, HAND_MADE.instrument,
                             book=HAND_MADE.book, flow=HAND_MADE.flow)
        feature_values(without, "lvl_imb_1", TABLE.families)
