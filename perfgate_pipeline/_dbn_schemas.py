"""DBN record layouts as numpy structured dtypes, and the schema/rtype/stype tables.

Every DBN record is a packed little-endian C struct that starts with the same 16-byte
header (``length`` in 4-byte words, ``rtype``, ``publisher_id``, ``instrument_id``,
``ts_event``). One schema always uses one struct, so a structured dtype laid over the
record region reads a whole file without copying. The layouts below were written from
the DBN specification (databento/dbn, ``rust/dbn/src/record.rs`` and ``compat.rs``)
and are checked field by field, offset by offset, against the official
``databento_dbn.v1|v2|v3.<Msg>._dtypes`` in ``tests/pipeline/test_dbn_loader.py``.

Only definition, statistics, error, symbol-mapping and system records differ between
DBN versions 1, 2 and 3; every market-data record is the same in all three. When the
metadata sets ``ts_out``, each record carries an extra ``u64`` gateway send time at its
end and its ``length`` byte counts it.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

__all__ = [
    "FIXED_PRICE_SCALE",
    "OHLCV_RTYPES",
    "RTYPE_NAMES",
    "SCHEMA_IDS",
    "SCHEMA_NAMES",
    "SCHEMA_RTYPES",
    "STYPE_NAMES",
    "SUPPORTED_VERSIONS",
    "UNDEF_PRICE",
    "UNDEF_TIMESTAMP",
    "record_dtype",
    "rtype_name",
    "stype_name",
]

SUPPORTED_VERSIONS = (1, 2, 3)

#: Prices are signed 64-bit fixed point: 1 unit = 1e-9 of the quote currency.
FIXED_PRICE_SCALE = 1_000_000_000
#: "No price" sentinel for every price field (i64::MAX); mask it before scaling.
UNDEF_PRICE = np.iinfo(np.int64).max
#: "No timestamp" sentinel (u64::MAX), also used by metadata ``end`` when unset.
UNDEF_TIMESTAMP = np.iinfo(np.uint64).max

#: Schema id (metadata offset 24, u16) -> schema name. 0xFFFF (mixed) is not listed.
SCHEMA_NAMES: MappingProxyType[int, str] = MappingProxyType(
    {
        0: "mbo",
        1: "mbp-1",
        2: "mbp-10",
        3: "tbbo",
        4: "trades",
        5: "ohlcv-1s",
        6: "ohlcv-1m",
        7: "ohlcv-1h",
        8: "ohlcv-1d",
        9: "definition",
        10: "statistics",
        11: "status",
        12: "imbalance",
        13: "ohlcv-eod",
        14: "cmbp-1",
        15: "cbbo-1s",
        16: "cbbo-1m",
        17: "tcbbo",
        18: "bbo-1s",
        19: "bbo-1m",
    }
)
SCHEMA_IDS: MappingProxyType[str, int] = MappingProxyType({name: sid for sid, name in SCHEMA_NAMES.items()})

#: Schema name -> the rtypes its records may carry. TBBO reuses the MBP-1 struct and
#: rtype 0x01; newer encoders may tag it 0xC5, which the official package already knows.
SCHEMA_RTYPES: MappingProxyType[str, tuple[int, ...]] = MappingProxyType(
    {
        "mbo": (0xA0,),
        "mbp-1": (0x01,),
        "mbp-10": (0x0A,),
        "tbbo": (0x01, 0xC5),
        "trades": (0x00,),
        "ohlcv-1s": (0x20,),
        "ohlcv-1m": (0x21,),
        "ohlcv-1h": (0x22,),
        "ohlcv-1d": (0x23,),
        "definition": (0x13,),
        "statistics": (0x18,),
        "status": (0x12,),
        "imbalance": (0x14,),
        "ohlcv-eod": (0x24,),
        "cmbp-1": (0xB1,),
        "cbbo-1s": (0xC0,),
        "cbbo-1m": (0xC1,),
        "tcbbo": (0xC2,),
        "bbo-1s": (0xC3,),
        "bbo-1m": (0xC4,),
    }
)

#: rtype -> readable name, for messages and for grouping mixed streams.
RTYPE_NAMES: MappingProxyType[int, str] = MappingProxyType(
    {
        0x00: "trades",
        0x01: "mbp-1",
        0x0A: "mbp-10",
        0x11: "ohlcv-deprecated",
        0x12: "status",
        0x13: "definition",
        0x14: "imbalance",
        0x15: "error",
        0x16: "symbol-mapping",
        0x17: "system",
        0x18: "statistics",
        0x20: "ohlcv-1s",
        0x21: "ohlcv-1m",
        0x22: "ohlcv-1h",
        0x23: "ohlcv-1d",
        0x24: "ohlcv-eod",
        0xA0: "mbo",
        0xB1: "cmbp-1",
        0xC0: "cbbo-1s",
        0xC1: "cbbo-1m",
        0xC2: "tcbbo",
        0xC3: "bbo-1s",
        0xC4: "bbo-1m",
        0xC5: "tbbo",
    }
)

#: The OHLCV bar rtypes (0x11 is the pre-2023 rtype for every bar interval).
OHLCV_RTYPES = frozenset({0x11, 0x20, 0x21, 0x22, 0x23, 0x24})

#: Symbology type ids (metadata stype_in/stype_out). The list grows over time, so an
#: unknown id is kept as a number, never rejected.
STYPE_NAMES: MappingProxyType[int, str] = MappingProxyType(
    {
        0: "instrument_id",
        1: "raw_symbol",
        2: "smart",
        3: "continuous",
        4: "parent",
        5: "nasdaq_symbol",
        6: "cms_symbol",
        7: "isin",
        8: "us_code",
        9: "bbg_comp_id",
        10: "bbg_comp_ticker",
        11: "figi",
        12: "figi_ticker",
        13: "listing_id",
        14: "issuer_id",
        15: "security_id",
    }
)


def rtype_name(rtype: int) -> str:
    """``0x21 -> "ohlcv-1m (0x21)"``; unknown rtypes are shown in hex only."""
    name = RTYPE_NAMES.get(rtype)
    return f"{name} (0x{rtype:02X})" if name else f"unknown rtype 0x{rtype:02X}"


def stype_name(stype: int | None) -> str:
    """The symbology name of a stype id; ``None`` (0xFF in the file) means mixed."""
    if stype is None:
        return "mixed"
    return STYPE_NAMES.get(stype, f"stype {stype}")


def _layout(spec: str) -> list[tuple[str, str]]:
    """Turn ``"name:type name:type ..."`` into dtype fields; types are little-endian."""
    fields = []
    for item in spec.split():
        name, kind = item.split(":")
        fields.append((name, kind if kind[0] == "S" else "<" + kind))
    return fields


# The 16-byte header at the front of every record.
_HEADER = "length:u1 rtype:u1 publisher_id:u2 instrument_id:u4 ts_event:u8"

# One bid/ask level (MBP-1, MBP-10, BBO) and one consolidated level (CMBP-1, CBBO, TCBBO);
# the official Python dtypes flatten level i into ``bid_px_0i`` ... as done here.
_LEVEL = "bid_px:i8 ask_px:i8 bid_sz:u4 ask_sz:u4 bid_ct:u4 ask_ct:u4"
_CONSOLIDATED_LEVEL = "bid_px:i8 ask_px:i8 bid_sz:u4 ask_sz:u4 bid_pb:u2 _reserved1:S2 ask_pb:u2 _reserved2:S2"


def _levels(level: str, count: int) -> str:
    parts: list[str] = []
    for i in range(count):
        parts.extend(f"{item.split(':')[0]}_{i:02d}:{item.split(':')[1]}" for item in level.split())
    return " ".join(parts)


_TRADE_BODY = (
    "price:i8 size:u4 action:S1 side:S1 flags:u1 depth:u1 ts_recv:u8 ts_in_delta:i4 sequence:u4"  # 48 bytes in all
)
_OHLCV = "open:i8 high:i8 low:i8 close:i8 volume:u8"
_MBO = "order_id:u8 price:i8 size:u4 flags:u1 channel_id:u1 action:S1 side:S1 ts_recv:u8 ts_in_delta:i4 sequence:u4"
_BBO = "price:i8 size:u4 _reserved1:u1 side:S1 flags:u1 _reserved2:u1 ts_recv:u8 _reserved3:S4 sequence:u4 " + _levels(
    _LEVEL, 1
)
_CMBP1 = "price:i8 size:u4 action:S1 side:S1 flags:u1 _reserved1:S1 ts_recv:u8 ts_in_delta:i4 _reserved2:S4 " + _levels(
    _CONSOLIDATED_LEVEL, 1
)
_CBBO = "price:i8 size:u4 _reserved1:u1 side:S1 flags:u1 _reserved2:u1 ts_recv:u8 _reserved3:S8 " + _levels(
    _CONSOLIDATED_LEVEL, 1
)
_STATUS = (
    "ts_recv:u8 action:u2 reason:u2 trading_event:u2 is_trading:S1 is_quoting:S1 is_short_sell_restricted:S1 "
    "_reserved:S7"
)
_IMBALANCE = (
    "ts_recv:u8 ref_price:i8 auction_time:u8 cont_book_clr_price:i8 auct_interest_clr_price:i8 "
    "ssr_filling_price:i8 ind_match_price:i8 upper_collar:i8 lower_collar:i8 paired_qty:u4 "
    "total_imbalance_qty:u4 market_imbalance_qty:u4 unpaired_qty:u4 auction_type:S1 side:S1 auction_status:u1 "
    "freeze_status:u1 num_extensions:u1 unpaired_side:S1 significant_imbalance:S1 _reserved:S1"
)
# Statistics: quantity widened from i32 to i64 in v3 (64 -> 80 bytes).
_STAT_V1 = (
    "ts_recv:u8 ts_ref:u8 price:i8 quantity:i4 sequence:u4 ts_in_delta:i4 stat_type:u2 channel_id:u2 "
    "update_action:u1 stat_flags:u1 _reserved:S6"
)
_STAT_V3 = (
    "ts_recv:u8 ts_ref:u8 price:i8 quantity:i8 sequence:u4 ts_in_delta:i4 stat_type:u2 channel_id:u2 "
    "update_action:u1 stat_flags:u1 _reserved:S18"
)
# Instrument definitions: 360 bytes in v1 (22-byte symbols), 400 in v2 (71-byte symbols,
# strike_price moved up), 520 in v3 (multi-leg fields, u64 raw_instrument_id).
_DEF_PRICES = (
    "ts_recv:u8 min_price_increment:i8 display_factor:i8 expiration:u8 activation:u8 high_limit_price:i8 "
    "low_limit_price:i8 max_price_variation:i8"
)
_DEF_V1 = (
    _DEF_PRICES + " trading_reference_price:i8 unit_of_measure_qty:i8 min_price_increment_amount:i8 price_ratio:i8 "
    "inst_attrib_value:i4 underlying_id:u4 raw_instrument_id:u4 market_depth_implied:i4 market_depth:i4 "
    "market_segment_id:u4 max_trade_vol:u4 min_lot_size:i4 min_lot_size_block:i4 min_lot_size_round_lot:i4 "
    "min_trade_vol:u4 _reserved2:S4 contract_multiplier:i4 decay_quantity:i4 original_contract_size:i4 "
    "_reserved3:S4 trading_reference_date:u2 appl_id:i2 maturity_year:u2 decay_start_date:u2 channel_id:u2 "
    "currency:S4 settl_currency:S4 secsubtype:S6 raw_symbol:S22 group:S21 exchange:S5 asset:S7 cfi:S7 "
    "security_type:S7 unit_of_measure:S31 underlying:S21 strike_price_currency:S4 instrument_class:S1 "
    "_reserved4:S2 strike_price:i8 _reserved5:S6 match_algorithm:S1 md_security_trading_status:u1 "
    "main_fraction:u1 price_display_format:u1 settl_price_type:u1 sub_fraction:u1 underlying_product:u1 "
    "security_update_action:S1 maturity_month:u1 maturity_day:u1 maturity_week:u1 user_defined_instrument:S1 "
    "contract_multiplier_unit:i1 flow_schedule_type:i1 tick_rule:u1 _dummy:S3"
)
_DEF_V2 = (
    _DEF_PRICES + " trading_reference_price:i8 unit_of_measure_qty:i8 min_price_increment_amount:i8 price_ratio:i8 "
    "strike_price:i8 inst_attrib_value:i4 underlying_id:u4 raw_instrument_id:u4 market_depth_implied:i4 "
    "market_depth:i4 market_segment_id:u4 max_trade_vol:u4 min_lot_size:i4 min_lot_size_block:i4 "
    "min_lot_size_round_lot:i4 min_trade_vol:u4 contract_multiplier:i4 decay_quantity:i4 "
    "original_contract_size:i4 trading_reference_date:u2 appl_id:i2 maturity_year:u2 decay_start_date:u2 "
    "channel_id:u2 currency:S4 settl_currency:S4 secsubtype:S6 raw_symbol:S71 group:S21 exchange:S5 asset:S7 "
    "cfi:S7 security_type:S7 unit_of_measure:S31 underlying:S21 strike_price_currency:S4 instrument_class:S1 "
    "match_algorithm:S1 md_security_trading_status:u1 main_fraction:u1 price_display_format:u1 "
    "settl_price_type:u1 sub_fraction:u1 underlying_product:u1 security_update_action:S1 maturity_month:u1 "
    "maturity_day:u1 maturity_week:u1 user_defined_instrument:S1 contract_multiplier_unit:i1 "
    "flow_schedule_type:i1 tick_rule:u1 _reserved:S10"
)
_DEF_V3 = (
    _DEF_PRICES + " unit_of_measure_qty:i8 min_price_increment_amount:i8 price_ratio:i8 strike_price:i8 "
    "raw_instrument_id:u8 leg_price:i8 leg_delta:i8 inst_attrib_value:i4 underlying_id:u4 "
    "market_depth_implied:i4 market_depth:i4 market_segment_id:u4 max_trade_vol:u4 min_lot_size:i4 "
    "min_lot_size_block:i4 min_lot_size_round_lot:i4 min_trade_vol:u4 contract_multiplier:i4 decay_quantity:i4 "
    "original_contract_size:i4 leg_instrument_id:u4 leg_ratio_price_numerator:i4 "
    "leg_ratio_price_denominator:i4 leg_ratio_qty_numerator:i4 leg_ratio_qty_denominator:i4 "
    "leg_underlying_id:u4 appl_id:i2 maturity_year:u2 decay_start_date:u2 channel_id:u2 leg_count:u2 "
    "leg_index:u2 currency:S4 settl_currency:S4 secsubtype:S6 raw_symbol:S71 group:S21 exchange:S5 asset:S11 "
    "cfi:S7 security_type:S7 unit_of_measure:S31 underlying:S21 strike_price_currency:S4 leg_raw_symbol:S71 "
    "instrument_class:S1 match_algorithm:S1 main_fraction:u1 price_display_format:u1 sub_fraction:u1 "
    "underlying_product:u1 security_update_action:S1 maturity_month:u1 maturity_day:u1 maturity_week:u1 "
    "user_defined_instrument:S1 contract_multiplier_unit:i1 flow_schedule_type:i1 tick_rule:u1 "
    "leg_instrument_class:S1 leg_side:S1 _reserved:S17"
)
_ERROR_V1 = "err:S64"
_ERROR_V2 = "err:S302 code:u1 is_last:u1"
_SYMBOL_MAPPING_V1 = "stype_in_symbol:S22 stype_out_symbol:S22 _dummy:S4 start_ts:u8 end_ts:u8"
_SYMBOL_MAPPING_V2 = "stype_in:u1 stype_in_symbol:S71 stype_out:u1 stype_out_symbol:S71 start_ts:u8 end_ts:u8"
_SYSTEM_V1 = "msg:S64"
_SYSTEM_V2 = "msg:S303 code:u1"


def _body_table(version: int) -> dict[int, str]:
    """rtype -> record body (everything after the 16-byte header) for one DBN version."""
    v1 = version == 1
    table = {
        0x00: _TRADE_BODY,
        0x01: _TRADE_BODY + " " + _levels(_LEVEL, 1),
        0xC5: _TRADE_BODY + " " + _levels(_LEVEL, 1),
        0x0A: _TRADE_BODY + " " + _levels(_LEVEL, 10),
        0x12: _STATUS,
        0x13: _DEF_V1 if v1 else _DEF_V2 if version == 2 else _DEF_V3,
        0x14: _IMBALANCE,
        0x15: _ERROR_V1 if v1 else _ERROR_V2,
        0x16: _SYMBOL_MAPPING_V1 if v1 else _SYMBOL_MAPPING_V2,
        0x17: _SYSTEM_V1 if v1 else _SYSTEM_V2,
        0x18: _STAT_V3 if version >= 3 else _STAT_V1,
        0xA0: _MBO,
        0xB1: _CMBP1,
        0xC0: _CBBO,
        0xC1: _CBBO,
        0xC2: _CMBP1,
        0xC3: _BBO,
        0xC4: _BBO,
    }
    for rtype in OHLCV_RTYPES:
        table[rtype] = _OHLCV
    return table


def _build_dtypes() -> dict[tuple[int, int, bool], np.dtype]:
    dtypes: dict[tuple[int, int, bool], np.dtype] = {}
    for version in SUPPORTED_VERSIONS:
        for rtype, body in _body_table(version).items():
            fields = _layout(_HEADER + " " + body)
            dtypes[(rtype, version, False)] = np.dtype(fields)
            dtypes[(rtype, version, True)] = np.dtype([*fields, ("ts_out", "<u8")])
    return dtypes


_DTYPES = _build_dtypes()


def record_dtype(rtype: int, version: int, ts_out: bool = False) -> np.dtype | None:
    """The structured dtype of one record, or ``None`` for an rtype this table lacks.

    Its ``itemsize`` is the record size in bytes; a valid record's ``length`` byte is
    ``itemsize // 4``.
    """
    return _DTYPES.get((rtype, version, bool(ts_out)))
