package io.mappedbuspy.internal;

import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import io.mappedbuspy.Layout;

/**
 * The wake file's JNI library, {@value WakeFile#LIBRARY_NAME} ({@code interop/native/wake_jni.c}; its functions are
 * {@link WakeFile}'s native methods), loaded when this class is first used: at the first wake file opened, so a
 * program that never parks nor wakes never loads it. It is loaded with {@link System#load} from the system property
 * {@value WakeFile#LIBRARY_PROPERTY} when set, else from beside the jar {@link WakeFile} came from, else from
 * {@code build/jvm} of the checkout named by the property {@code mappedbuspy.root}; a library built from another
 * {@code _wake.h} or {@code wake_jni.c} is refused. Without it nothing fails (see {@link WakeFile}); one log line
 * says so.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class WakeLibrary {
    public static final boolean LOADED;
    public static final String WHAT;

    static {
        boolean ok = false;
        StringBuilder why = new StringBuilder();
        String loaded = null;
        for (Path p : candidates()) {
            if (!Files.isRegularFile(p)) {
                why.append(why.length() == 0 ? "" : "; ").append(p).append(": no such file");
                continue;
            }
            boolean opened = false;
            try {
                System.load(p.toAbsolutePath().toString());
                opened = true;
                if (Arrays.equals(nativeConstants(), expectedConstants())) {
                    // Each function bound now (JNI binds at the first call): a library from before the
                    // protocol moved to Java lacks these, and must not fail a reader's park later.
                    WakeFile.nFutexWake(WakeFile.ZEROS_ADDRESS); // nobody waits on the page of zeros
                    WakeFile.nFutexWait(WakeFile.ZEROS_ADDRESS, 1, 0); // it does not hold 1: returns at once
                    Liveness.nProbe(-1, 0); // no such descriptor: LIVE_ERROR
                    DiskSpace.nFallocate(-1, 0, 1); // no such descriptor: EBADF
                    DiskSpace.nPopulate(0, 0, false); // nothing to map
                    ok = true;
                    loaded = p.toAbsolutePath().toString();
                } else {
                    why.append(why.length() == 0 ? "" : "; ").append(p)
                            .append(": built from another _wake.h (its constants differ from Layout's)");
                }
            } catch (UnsatisfiedLinkError | SecurityException e) {
                why.append(why.length() == 0 ? "" : "; ").append(p).append(": ").append(e.getMessage())
                        .append(opened ? " (built from another wake_jni.c: interop/build_native.sh rebuilds it)"
                                : "");
            }
            break; // the first file found is the one meant
        }
        LOADED = ok;
        WHAT = ok ? loaded : why.length() == 0 ? "not found" : why.toString();
        if (!ok) {
            WakeFile.LOG.log(System.Logger.Level.INFO, "mappedbus: no wake library (" + WHAT + "): readers park by polling "
                    + "every " + Layout.DEFAULT_PARK_NS + " ns instead of sleeping until woken, writers wake nobody");
        }
    }

    private static List<Path> candidates() {
        List<Path> c = new ArrayList<>();
        String prop = System.getProperty(WakeFile.LIBRARY_PROPERTY);
        if (prop != null && !prop.isEmpty()) {
            c.add(Paths.get(prop)); // an explicit choice: only it
            return c;
        }
        try {
            CodeSource cs = WakeFile.class.getProtectionDomain().getCodeSource();
            if (cs != null && cs.getLocation() != null && "file".equals(cs.getLocation().getProtocol())) {
                Path where = Paths.get(cs.getLocation().toURI());
                if (Files.isDirectory(where)) {          // build/jvm/classes
                    c.add(where.resolve(WakeFile.LIBRARY_NAME));
                    if (where.getParent() != null) {
                        c.add(where.getParent().resolve(WakeFile.LIBRARY_NAME));
                    }
                } else if (where.getParent() != null) { // beside the jar
                    c.add(where.getParent().resolve(WakeFile.LIBRARY_NAME));
                }
            }
        } catch (URISyntaxException | RuntimeException e) {
            // no usable location: the checkout's, if named
        }
        String root = System.getProperty("mappedbuspy.root");
        if (root != null && !root.isEmpty()) {
            c.add(Paths.get(root, "build", "jvm", WakeFile.LIBRARY_NAME));
        }
        return c;
    }

    private WakeLibrary() {
    }

    /**
     * The constants of {@code _wake.h} as the library was compiled, in this order: WAKE_FILE_SIZE, WAKE_MAGIC,
     * WAKE_VERSION, WAKE_MAGIC_OFFSET, WAKE_VERSION_OFFSET, WAKE_PARKED_OFFSET, WAKE_SEQ_OFFSET, WAKE_SLOTS_OFFSET,
     * WAKE_SLOT_SIZE, WAKE_SLOT_COUNT, WAKE_SLOT_PID_OFFSET, WAKE_SLOT_STATE_OFFSET, WAKE_SLOT_START_OFFSET,
     * WAKE_STATE_IDLE, WAKE_STATE_PARKED, WAKE_FUTILE_RECLAIM, WAKE_PIN_NS, WAKE_ARMED_OFFSET.
     */
    static long[] nativeConstants() {
        long[] c = new long[18];
        for (int i = 0; i < c.length; i++) {
            c[i] = WakeFile.nConstant(i);
        }
        return c;
    }

    /** What this class expects of the library: {@link #nativeConstants()}'s order. */
    static long[] expectedConstants() {
        return new long[] {Layout.WAKE_FILE_SIZE, Layout.WAKE_MAGIC, Layout.WAKE_VERSION, Layout.WAKE_MAGIC_OFFSET,
            Layout.WAKE_VERSION_OFFSET, Layout.WAKE_PARKED_OFFSET, Layout.WAKE_SEQ_OFFSET, Layout.WAKE_SLOTS_OFFSET,
            Layout.WAKE_SLOT_SIZE, Layout.WAKE_SLOT_COUNT, Layout.WAKE_SLOT_PID_OFFSET, Layout.WAKE_SLOT_STATE_OFFSET,
            Layout.WAKE_SLOT_START_OFFSET, WakeProtocol.STATE_IDLE, WakeProtocol.STATE_PARKED, WakeFile.FUTILE_RECLAIM,
            Waiter.PIN_NS, Layout.WAKE_ARMED_OFFSET};
    }
}
