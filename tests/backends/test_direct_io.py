"""The direct path's buffer layouts and procedure symbols, read from the compiled model's
``modelAttributes`` (anekit.backends.direct_io): strided rows packed and unpacked value
for value, symbols taken from the model's procedure list, bad descriptions named."""

from __future__ import annotations

import numpy as np
import pytest

from anekit.backends.direct_io import Layout, procedures
from anekit.errors import BackendUnavailableError


def _entry(name: str, channels: int, width: int, row: int, symbol: int) -> dict[str, object]:
    return {"Name": name, "Symbol": symbol, "Type": "Float16", "Batches": 1,
            "Channels": channels, "Depth": 1, "Height": 1, "Width": width, "RowStride": row,
            "PlaneStride": row, "DepthStride": row, "BatchStride": row * channels}  # fmt: skip


def test_a_dense_layout_is_the_arrays_own_bytes() -> None:
    value = np.arange(2 * 3 * 1 * 40, dtype=np.float16).reshape(2, 3, 1, 40)
    layout = Layout.dense("x", value.shape)
    assert layout.dims == (2, 3, 1, 1, 40) and layout.size == value.nbytes
    assert layout.pack(value) == value.tobytes()
    np.testing.assert_array_equal(layout.unpack(value.tobytes()), value)
    assert Layout.dense("v", (48,)).dims == (1, 1, 1, 1, 48)


def test_rows_at_a_padded_stride_are_written_and_read_in_place() -> None:
    """40 fp16 values a row (80 bytes), rows every 128 bytes: the gaps stay zero and each
    row starts at its stride."""
    value = np.arange(3 * 40, dtype=np.float16).reshape(1, 3, 1, 40) + 1
    layout = procedures(
        [("main", [("x", (1, 3, 1, 40))], [])],
        {"NetworkStatusList": [{"LiveInputList": [_entry("x", 3, 40, 128, 0)]}]},
    )[0].inputs[0]
    data = layout.pack(value)
    assert len(data) == layout.size == 3 * 128
    for channel in range(3):
        row = np.frombuffer(data, np.float16, 40, channel * 128)
        np.testing.assert_array_equal(row, value[0, channel, 0])
        assert data[channel * 128 + 80 : (channel + 1) * 128] == bytes(48)
    np.testing.assert_array_equal(layout.unpack(data), value)
    with pytest.raises(ValueError, match=r"input x: shape \(1, 3, 40\), expected \(1, 3, 1, 40\)"):
        layout.pack(value.reshape(1, 3, 40))


def test_symbols_come_from_the_models_procedure_list() -> None:
    functions = [
        ("seq128", [("a", (1, 4, 1, 32))], [("y", (1, 4, 1, 32))]),
        ("seq192", [("a", (1, 4, 1, 32))], [("y", (1, 4, 1, 32))]),
    ]
    attributes = {
        "ANEFModelDescription": {
            "ANEFModelProcedures": [
                {"ANEFModelInputSymbolIndexArray": [3], "ANEFModelOutputSymbolIndexArray": [0]},
                {"ANEFModelInputSymbolIndexArray": [5], "ANEFModelOutputSymbolIndexArray": [2]},
            ]
        }
    }
    found = procedures(functions, attributes)
    assert [(p.name, p.index, p.input_symbols, p.output_symbols) for p in found] == [
        ("seq128", 0, (3,), (0,)),
        ("seq192", 1, (5,), (2,)),
    ]
    # nothing reported: dense layouts, symbols numbered across the procedures
    found = procedures(functions, None)
    assert [(p.input_symbols, p.output_symbols) for p in found] == [((0,), (0,)), ((1,), (1,))]
    assert found[1].inputs[0] == Layout.dense("a", (1, 4, 1, 32))


def test_a_description_that_does_not_fit_the_program_is_named() -> None:
    wrong = {"NetworkStatusList": [{"LiveInputList": [_entry("x", 3, 40, 128, 0)]}]}
    with pytest.raises(BackendUnavailableError, match=r"procedure 0 \(main\) input x: .*lays out"):
        procedures([("main", [("x", (1, 4, 1, 40))], [])], wrong)
    with pytest.raises(BackendUnavailableError, match="reports 1, the program has 2"):
        procedures([("main", [("x", (1, 3, 1, 40)), ("z", (1, 3, 1, 40))], [])], wrong)
    bad_type = {
        "NetworkStatusList": [{"LiveInputList": [{**_entry("x", 3, 40, 128, 0), "Type": "Int8"}]}]
    }
    with pytest.raises(BackendUnavailableError, match="element type 'Int8'"):
        procedures([("main", [("x", (1, 3, 1, 40))], [])], bad_type)
    short_rows = {"NetworkStatusList": [{"LiveInputList": [_entry("x", 3, 40, 64, 0)]}]}
    with pytest.raises(BackendUnavailableError, match="impossible buffer description"):
        procedures([("main", [("x", (1, 3, 1, 40))], [])], short_rows)
