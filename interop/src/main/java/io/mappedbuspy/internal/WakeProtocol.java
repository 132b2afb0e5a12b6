package io.mappedbuspy.internal;

import java.io.IOException;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;

/**
 * The wake file's protocol, {@code mappedbus_py/_core/_wake.h}, statement by statement: each step names the C function it
 * mirrors and takes the address {@code w} of the mapped file (or of {@link WakeFile}'s page of zeros), as the C
 * functions take its {@code char *}. The memory orders are {@code _atomic.h}'s: its seq-cst compare-and-swap,
 * fetch-add, exchange, load and store are Unsafe's compareAndSwapInt, getAndAddInt, getAndSetInt, getIntVolatile
 * and putIntVolatile (all sequentially consistent; {@link MemoryMappedFile}'s {@code *At} accessors); an acquire
 * load is a volatile load (as strong); a release store is putOrderedLong (release). The system calls are
 * {@link WakeFile}'s native methods, and the liveness of a slot's parker is {@link Liveness}'s OFD lock on the slot's
 * first byte (_liveness.h), taken through the channel of the {@link WakeFile} that holds it.
 *
 * <p>Nothing here checks for a fault: {@link WakeFile}'s public steps raise its report
 * ({@code MemoryMappedFile.raiseFaultReports}) before they use what came of it, and then stop using the file.
 * <p>Internal: not a supported API.
 */
final class WakeProtocol {
    // _wake.h's WAKE_STATE_IDLE and WAKE_STATE_PARKED: a slot's state.
    static final int STATE_IDLE = 0;
    static final int STATE_PARKED = 1;

    private WakeProtocol() {
    }

    // Opens (creating if absent) and maps a wake file as bus files are opened (WakeFile.open), initialised
    // by wake_init under the open lock.
    static MemoryMappedFile map(Path file, boolean allowForeign, String perms) throws IOException {
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.create = true;
        o.grow = true;
        o.exclusive = true; // serialises growing a new file with zeros against another opener's initialisation
        o.allowForeign = allowForeign;
        o.perms = perms;
        o.lockOffset = Layout.WAKE_OPEN_LOCK_OFFSET; // a whole-file lock would wait on the slots' liveness locks
        o.afterMap = f -> {
            int rc;
            try {
                rc = wakeInit(f);
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                if (!MemoryMappedFile.isMappingFault(e)) {
                    throw e;
                }
                throw new IOException(file + " was truncated while being opened", e);
            }
            if (rc != 0) {
                throw new CorruptBusException(file + " is not a bus wake file: " + (rc == -1
                        ? "its magic is not a wake file's" : rc == -2 ? "its version is "
                        + f.getIntAcquire(Layout.WAKE_VERSION_OFFSET) + ", this reads " + Layout.WAKE_VERSION
                        + " (an older one is of a release that told parkers by pid: stop every process of the bus and "
                        + "delete the file)" : "its parked count is impossible"));
            }
        };
        return MemoryMappedFile.open(file.toString(), Layout.WAKE_FILE_SIZE, o);
    }

    // wake_init: the magic and the version set by compare-and-swap from 0 (seq-cst; a failed swap loads the value
    // it found, as cas_i64/cas_i32 return it), then the parked count checked. 0, or -1/-2/-3 as in C.
    static int wakeInit(MemoryMappedFile f) {
        if (!f.compareAndSetLong(Layout.WAKE_MAGIC_OFFSET, 0, Layout.WAKE_MAGIC)
                && f.getLongAcquire(Layout.WAKE_MAGIC_OFFSET) != Layout.WAKE_MAGIC) {
            return -1;
        }
        if (!f.compareAndSetInt(Layout.WAKE_VERSION_OFFSET, 0, Layout.WAKE_VERSION)
                && f.getIntAcquire(Layout.WAKE_VERSION_OFFSET) != Layout.WAKE_VERSION) {
            return -2;
        }
        int parked = f.getIntAcquire(Layout.WAKE_PARKED_OFFSET);
        return parked < 0 || parked > Layout.WAKE_SLOT_COUNT ? -3 : 0;
    }



    // wake_slot: the address of slot i.
    static long wakeSlot(long w, int i) {
        return w + Layout.WAKE_SLOTS_OFFSET + (long) i * Layout.WAKE_SLOT_SIZE;
    }

    // wake_slot_byte: the offset of slot i's liveness byte (its first).
    static long wakeSlotByte(int i) {
        return Layout.WAKE_SLOTS_OFFSET + (long) i * Layout.WAKE_SLOT_SIZE;
    }

    // wake_done: undo a parked slot, state 1 -> 0 (cas_i32), then parked -= 1 (fetch_add_i32). Exactly one caller
    // wins.
    static void wakeDone(long w, int i) {
        if (MemoryMappedFile.compareAndSetIntAt(wakeSlot(w, i) + Layout.WAKE_SLOT_STATE_OFFSET, STATE_PARKED,
                STATE_IDLE)) {
            MemoryMappedFile.getAndAddIntAt(w + Layout.WAKE_PARKED_OFFSET, -1);
        }
    }

    // wake_reclaim: undo the slots whose parkers died. Each parked slot (parkedOnly; else each parked or showing a
    // pid) whose liveness byte `ch` can take has no live parker: undone while held (no claimer takes it meanwhile),
    // its pid cleared (store_release_i32), its time cleared (store_release_i64), the byte let go. `ch`: a channel of
    // the file that holds no slot. How many it undid, or -1 if no lock can be taken.
    static int wakeReclaim(long w, FileChannel ch, boolean parkedOnly) {
        int freed = 0;
        for (int i = 0; i < Layout.WAKE_SLOT_COUNT; i++) {
            long s = wakeSlot(w, i);
            boolean parked = MemoryMappedFile.getIntVolatileAt(s + Layout.WAKE_SLOT_STATE_OFFSET) == STATE_PARKED;
            if (!parked && (parkedOnly || MemoryMappedFile.getIntVolatileAt(s + Layout.WAKE_SLOT_PID_OFFSET) == 0)) {
                continue;
            }
            Liveness.Hold h = Liveness.hold(ch, wakeSlotByte(i));
            if (h == Liveness.Hold.BUSY) {
                continue;
            }
            if (h != Liveness.Hold.TAKEN) {
                return -1;
            }
            wakeDone(w, i);
            MemoryMappedFile.putIntVolatileAt(s + Layout.WAKE_SLOT_PID_OFFSET, 0);
            MemoryMappedFile.putLongReleaseAt(s + Layout.WAKE_SLOT_START_OFFSET, 0);
            Liveness.release(ch, wakeSlotByte(i));
            freed++;
        }
        return freed;
    }

    // wake_claim: a slot for the parker holding `ch` (which holds no other slot of this file): the first whose
    // liveness byte it takes, undone first if its last parker died parked, then showing the time and pid. -1 if
    // every slot has a live parker, -2 if no lock can be taken.
    static int wakeClaim(long w, FileChannel ch, int pid) {
        for (int i = 0; i < Layout.WAKE_SLOT_COUNT; i++) {
            Liveness.Hold h = Liveness.hold(ch, wakeSlotByte(i));
            if (h == Liveness.Hold.BUSY) {
                continue;
            }
            if (h != Liveness.Hold.TAKEN) {
                return -2;
            }
            long s = wakeSlot(w, i);
            wakeDone(w, i);
            MemoryMappedFile.putLongReleaseAt(s + Layout.WAKE_SLOT_START_OFFSET, System.currentTimeMillis() * 1_000_000L);
            MemoryMappedFile.putIntVolatileAt(s + Layout.WAKE_SLOT_PID_OFFSET, pid);
            return i;
        }
        return -1;
    }

    // wake_release: undo a park left open, clear the pid and the time, then let the byte go (closing the channel
    // would do that too).
    static void wakeRelease(long w, FileChannel ch, int i) {
        long s = wakeSlot(w, i);
        wakeDone(w, i);
        MemoryMappedFile.putIntVolatileAt(s + Layout.WAKE_SLOT_PID_OFFSET, 0);
        MemoryMappedFile.putLongReleaseAt(s + Layout.WAKE_SLOT_START_OFFSET, 0);
        Liveness.release(ch, wakeSlotByte(i));
    }

    // wake_prepare: register as parked, returning the seq value to wait on. state 0 -> 1 (cas_i32) and if so
    // parked += 1 (fetch_add_i32); armed = 1 (store_seq_cst_i32); a full fence (fence_seq_cst), which orders the
    // caller's look at the bus after the registration; seq (load_acquire_i32).
    static int wakePrepare(long w, int i) {
        if (MemoryMappedFile.compareAndSetIntAt(wakeSlot(w, i) + Layout.WAKE_SLOT_STATE_OFFSET, STATE_IDLE,
                STATE_PARKED)) {
            MemoryMappedFile.getAndAddIntAt(w + Layout.WAKE_PARKED_OFFSET, 1);
        }
        MemoryMappedFile.putIntVolatileAt(w + Layout.WAKE_ARMED_OFFSET, 1);
        VarHandle.fullFence();
        return MemoryMappedFile.getIntVolatileAt(w + Layout.WAKE_SEQ_OFFSET);
    }

    // wake_seq: the futex word (load_acquire_i32), as the same 32 bits.
    static int wakeSeq(long w) {
        return MemoryMappedFile.getIntVolatileAt(w + Layout.WAKE_SEQ_OFFSET);
    }

    // wake_wait: a parker's sleep, after wakePrepare and its look at the bus. If a writer took the arming meanwhile
    // (armed is 0: load_seq_cst_i32), return at once: its wake may be for a record the look missed, bumped before
    // v; the caller looks and parks again. Otherwise FUTEX_WAIT while seq holds v, at most ns (wake_wait_raw).
    static void wakeWait(long w, int v, long ns) {
        if (MemoryMappedFile.getIntVolatileAt(w + Layout.WAKE_ARMED_OFFSET) == 0) {
            return;
        }
        WakeFile.nFutexWait(w, v, ns);
    }

    // wake_bump: seq += 1 (fetch_add_i32), then FUTEX_WAKE every waiter on it; how many the kernel woke (0 on an
    // error, as a truncated page's EFAULT).
    static int wakeBump(long w) {
        MemoryMappedFile.getAndAddIntAt(w + Layout.WAKE_SEQ_OFFSET, 1);
        return WakeFile.nFutexWake(w);
    }

    // wake_all: a writer's wake after wakeNeeded said armed. -1 if another writer took the arming first
    // (exchange_i32 armed 1 -> 0 found 0: its wake serves us), else how many the kernel woke.
    static int wakeAll(long w) {
        if (MemoryMappedFile.getAndSetIntAt(w + Layout.WAKE_ARMED_OFFSET, 0) == 0) {
            return -1;
        }
        return wakeBump(w);
    }
}
