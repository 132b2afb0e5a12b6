"""RollingBusWriter's sizes: errors name segment_size (not a single file's file_size), and the
writer of an existing rolling bus takes the sizes it leaves out from bus.meta, as the reader does."""
import os
import pickle

import pytest

from mappedbus_py import BusMismatchError, PriceUpdate, RollingBusReader, RollingBusWriter

SEG = 4096


@pytest.fixture
def bus_dir(tmp_path):
    return str(tmp_path / "bus.d")


def test_a_segment_too_small_names_segment_size(bus_dir):
    with pytest.raises(ValueError) as e:
        RollingBusWriter(bus_dir, 10, 12)
    assert str(e.value).startswith("segment_size 10 cannot hold one record of record_size 12")
    assert "file_size" not in str(e.value)
    with pytest.raises(TypeError, match="^segment_size must be an integer"):
        RollingBusWriter(bus_dir, "4096", 12)
    with pytest.raises(ValueError, match="^segment_size must be positive"):
        RollingBusWriter(bus_dir, -1, 12)
    with pytest.raises(TypeError, match="^record_size must be an integer, got bool"):
        RollingBusWriter(bus_dir, SEG, True)
    assert not os.path.exists(bus_dir)


@pytest.mark.parametrize("sizes, missing", [((), "segment_size and record_size"),
                                            ((SEG,), "record_size"),
                                            ((None, 12), "segment_size")])
def test_a_new_bus_without_its_sizes_is_a_clear_error(bus_dir, sizes, missing):
    with pytest.raises(ValueError) as e:
        RollingBusWriter(bus_dir, *sizes)
    assert str(e.value).startswith(f"{bus_dir!r}: {missing} not given and there is no rolling "
                                   f"bus here (no bus.meta)")
    assert "a new rolling bus needs both sizes" in str(e.value)
    assert not os.path.exists(bus_dir)


def test_the_writer_of_an_existing_bus_takes_its_sizes_from_bus_meta(bus_dir):
    with RollingBusWriter(bus_dir, SEG, 12, retain_segments=3) as w:
        w.write(PriceUpdate(1, 1, 1))
    for args in [(), (None, 12), (SEG,), (SEG, None)]:
        w = RollingBusWriter(bus_dir, *args)
        assert (w.segment_size, w.record_size) == (SEG, 12)
    with RollingBusWriter(bus_dir) as w:
        assert w.meta.retain_segments == 3
        for i in range(2, 400):                       # rolls: the sizes are the bus's
            w.write(PriceUpdate(1, i, 1))
        assert w.segment >= 1
        again = pickle.loads(pickle.dumps(w))
        assert (again.segment_size, again.record_size) == (SEG, 12) and not again.closed
        again.close()
    with RollingBusReader(bus_dir) as r:
        assert [rec.decode([PriceUpdate]).price for rec in r.records(timeout=0)] == \
            list(range(1, 400))


@pytest.mark.parametrize("sizes, name, given", [((2 * SEG,), "segment_size", 2 * SEG),
                                                ((None, 16), "record_size", 16),
                                                ((2 * SEG, 12), "segment_size", 2 * SEG)])
def test_a_size_that_disagrees_with_bus_meta_names_both(bus_dir, sizes, name, given):
    RollingBusWriter(bus_dir, SEG, 12).open().close()
    recorded = {"segment_size": SEG, "record_size": 12}[name]
    with pytest.raises(BusMismatchError, match=f"was created with {name} {recorded}, not {given}"):
        RollingBusWriter(bus_dir, *sizes).open()
