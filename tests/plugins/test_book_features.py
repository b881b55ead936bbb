"""The book_features plugin: each family against a float64 loop reference on hand-made and random books, its
hooks through the host's explicit registration, and a DBN round trip through databento-dbn's own encoder."""

from __future__ import annotations

import math

import databento_dbn as db
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data import BOOK, FLOW, OHLCV, MarketData, load, preset
from foxhunt.features import FeatureTable, compute_features
from foxhunt.features.library import feature_values, parse_feature
from foxhunt.testing import make_host
from foxhunt_plugins import book_features
from foxhunt_plugins.book_features import HAWKES_WARMUP_SPANS
from dbn_writers import MINUTE, SCALE, T0, book_levels, px, write
from market_builders import with_book

TABLE, _ = FeatureTable.compose([("book_features", f) for f in book_features.FAMILIES],
                                [("book_features", book_features.BOOK_FULL)])


def market_of(close, qb, qa, db_, da, buy, sell, trades) -> MarketData:
    """A market from per-bar columns (the bars' other prices follow the close)."""
    close = np.asarray(close, dtype=np.float64)
    n = close.size
    ohlcv = np.column_stack([close, close, close, close, np.asarray(buy, float) + np.asarray(sell, float)])
    book = np.zeros((n, BOOK.size()))
    book[:, BOOK.BID_PRICE], book[:, BOOK.ASK_PRICE] = close - 0.25, close + 0.25
    book[:, BOOK.BID_SIZE], book[:, BOOK.ASK_SIZE] = qb, qa
    book[:, BOOK.BID_DEPTH], book[:, BOOK.ASK_DEPTH] = db_, da
    flow = np.zeros((n, FLOW.size()))
    flow[:, FLOW.BUY_VOLUME], flow[:, FLOW.SELL_VOLUME], flow[:, FLOW.TRADES] = buy, sell, trades
    stamps = np.datetime64("2024-01-02T09:30", "ns") + np.arange(n) * np.timedelta64(1, "m")
    return MarketData("hand-made", stamps, ohlcv, preset("ES"), book=book, flow=flow)


def ratio(a: float, b: float) -> float:
    return a / b if b != 0 else 0.0


# -- float64 references, one bar at a time, written from the formulas in docs/data.md -----------------------
def reference(market: MarketData, base: str, *p: int) -> tuple[list[float], int]:
    book, flow, n = market.book, market.flow, len(market)
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
    if base == "dofi":
        for t in range(k, n):
            net = (db_[t] - db_[t - k]) - (da[t] - da[t - k])
            out[t] = net / max(1.0, sum((db_[s] + da[s]) / 2 for s in range(t - k + 1, t + 1)))
        return out, k
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


NAMES = ("deep_imbalance", "dofi_1", "dofi_3", "qdep_1", "qdep_2", "aggr_1", "aggr_3", "hawkes_1", "hawkes_2",
         "hawkes_imb_1", "hawkes_imb_2", "mtf_ret_1_1", "mtf_ret_2_2", "mtf_ret_3_1", "mtf_rvol_1_2", "mtf_rvol_2_2")


def test_every_family_has_a_reference_case() -> None:
    assert {parse_feature(name, TABLE.families)[0].base for name in NAMES} == {f.base for f in book_features.FAMILIES}


HAND_MADE = market_of(
    close=[100, 101, 99, 102, 102, 104, 103, 105, 104, 106, 107, 105],
    qb=[10, 8, 0, 5, 12, 3, 7, 7, 9, 2, 4, 6], qa=[9, 0, 4, 6, 6, 11, 2, 8, 5, 5, 10, 3],
    db_=[50, 44, 30, 35, 60, 41, 48, 52, 49, 40, 45, 47], da=[45, 30, 33, 38, 40, 56, 39, 51, 44, 47, 50, 42],
    buy=[3, 0, 5, 0, 2, 7, 1, 0, 4, 6, 2, 0], sell=[1, 0, 2, 6, 0, 3, 0, 0, 5, 1, 3, 2],
    trades=[2, 0, 3, 4, 1, 5, 1, 0, 6, 3, 2, 1],
)


@pytest.mark.parametrize("name", NAMES)
def test_hand_made_book_matches_the_reference(name: str) -> None:
    check_against_reference(HAND_MADE, name)


def test_hand_made_values_worked_by_hand() -> None:
    """A few values computed on paper, so the reference itself is checked."""
    values = {name: feature_values(HAND_MADE, name, TABLE.families)[0] for name in
              ("deep_imbalance", "qdep_1", "aggr_1", "mtf_ret_2_2", "dofi_1")}
    assert values["deep_imbalance"][0] == pytest.approx((40 - 36) / (40 + 36))
    assert values["qdep_1"][1] == pytest.approx(np.log(9 / 11) - np.log(1 / 10))
    assert values["aggr_1"][1] == 0.0  # no trades against an empty ask: both ratios are 0
    assert values["aggr_1"][2] == pytest.approx(np.log1p(5 / 4))  # sells against an empty bid queue count 0
    # bar 5 closes block 2 (bars 4-5); two blocks back ends at bar 1
    assert values["mtf_ret_2_2"][5] == pytest.approx(np.log(104 / 101))
    assert values["mtf_ret_2_2"][6] == pytest.approx(np.log(104 / 101))  # block 3 is not complete at bar 6
    assert values["dofi_1"][1] == pytest.approx(((44 - 50) - (30 - 45)) / ((44 + 30) / 2))


@settings(max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(NAMES + ("dofi_16", "hawkes_8", "mtf_rvol_5_3")))
def test_random_books_match_the_reference(seed: int, name: str) -> None:
    rng = np.random.default_rng(seed)
    n = 90
    qb, qa = rng.integers(0, 30, n), rng.integers(0, 30, n)
    check_against_reference(market_of(
        close=100 * np.exp(np.cumsum(rng.normal(0, 0.01, n))), qb=qb, qa=qa,
        db_=qb + rng.integers(0, 300, n), da=qa + rng.integers(0, 300, n),
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
    # each bar's close state and flow, straight from the events (book_levels: level i has q + i and q + 2 i)
    last = {row[0] // 60: row for row in rows}
    close = [(last[m][4] + last[m][5]) / 2 for m in range(40)]
    qb, qa = [last[m][6] for m in range(40)], [last[m][7] for m in range(40)]
    # a trade's side is its aggressor's: BID a buy, ASK a sell
    buy = [sum(r[3] for r in rows if r[0] // 60 == m and r[1] == db.Action.TRADE and r[2] == db.Side.BID) for m in range(40)]
    sell = [sum(r[3] for r in rows if r[0] // 60 == m and r[1] == db.Action.TRADE and r[2] == db.Side.ASK) for m in range(40)]
    trades = [sum(1 for r in rows if r[0] // 60 == m and r[1] == db.Action.TRADE) for m in range(40)]
    from_events = market_of(close, qb, qa, [10 * q + 45 for q in qb], [10 * q + 90 for q in qa], buy, sell, trades)
    np.testing.assert_allclose(market.close, close)
    np.testing.assert_allclose(market.ohlcv[:, OHLCV.VOLUME], np.add(buy, sell))
    for name in ("deep_imbalance", "dofi_4", "qdep_2", "aggr_4", "hawkes_3", "hawkes_imb_3", "mtf_ret_4_2", "mtf_rvol_4_2"):
        loaded, warmup = feature_values(market, name, TABLE.families)
        expected, _ = feature_values(from_events, name, TABLE.families)
        np.testing.assert_allclose(loaded[warmup:], expected[warmup:], rtol=1e-12, err_msg=name)
        assert np.isfinite(loaded[warmup:]).all() and np.abs(loaded[warmup:]).max() > 0, name
    assert T0 % MINUTE == 0  # the bars start on a minute, as the per-minute grouping above assumes
