package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.nio.file.NoSuchFileException;

/**
 * A writer or reader process for tests/jvm/test_java_safety.py: it keeps a bus open while the test truncates,
 * replaces or removes the file, reopens after every BusTruncatedException / BusReplacedException, and prints
 * how many it saw. Exits 0 unless something else went wrong.
 *
 * <pre>
 * java ... io.mappedbuspy.SafetyChild writer|reader PATH FILE_SIZE RECORD_SIZE SECONDS
 * </pre>
 */
public final class SafetyChild {
    private SafetyChild() {
    }

    public static void main(String[] args) throws Exception {
        String role = args[0];
        String path = args[1];
        long fileSize = Long.parseLong(args[2]);
        int recordSize = Integer.parseInt(args[3]);
        long end = System.nanoTime() + (long) (Double.parseDouble(args[4]) * 1e9);
        long truncated = 0;
        long replaced = 0;
        long records = 0;
        long opens = 0;
        long escaped = 0;
        byte[] buf = new byte[recordSize];
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            try {
                if (role.equals("writer")) {
                    try (MappedBusWriter w = new MappedBusWriter(path, fileSize, recordSize).open()) {
                        opens++;
                        while (System.nanoTime() < end) {
                            try {
                                w.write(buf, 0, recordSize);
                                records++;
                                // A steady writer (about 50 000 records/s), so the bus does not fill at once;
                                // spinning, not sleeping, as a low-latency writer would.
                                long until = System.nanoTime() + 20_000;
                                while (System.nanoTime() < until) {
                                    Thread.onSpinWait();
                                }
                            } catch (EOFException full) {
                                Thread.sleep(1);
                            }
                        }
                    }
                } else {
                    try (MappedBusReader r = new MappedBusReader(path, fileSize, recordSize).open()) {
                        opens++;
                        r.setTimeout(50);
                        while (System.nanoTime() < end) {
                            try {
                                if (r.next()) {
                                    r.readBuffer(buf, 0);
                                    records++;
                                }
                            } catch (EOFException full) {
                                Thread.sleep(1);
                            }
                        }
                    }
                }
            } catch (BusTruncatedException e) {
                truncated++;
                check(e.getMessage(), path);
            } catch (BusReplacedException e) {
                replaced++;
                check(e.getMessage(), path);
            } catch (java.io.UncheckedIOException e) {
                // A writer's write() found its file replaced (the writers' watch, FileWatch).
                if (!(e.getCause() instanceof BusReplacedException)) {
                    throw e;
                }
                replaced++;
                check(e.getCause().getMessage(), path);
            } catch (InternalError e) {
                // The JVM delivers a fault report at its next safepoint or native call, which may lie
                // outside the bus's methods: counted, to measure how often that happens.
                escaped++;
            } catch (NoSuchFileException | BusMismatchException | CorruptBusException e) {
                Thread.sleep(1); // between a removal and the writer's new file, or a half-made one
            } catch (IOException e) {
                if (e.getMessage() == null || !e.getMessage().contains("shorter than")) {
                    throw e;
                }
                Thread.sleep(1);
            }
        }
        System.out.println("truncated=" + truncated + " replaced=" + replaced + " records=" + records
                + " opens=" + opens + " escaped=" + escaped);
    }

    private static void check(String message, String path) {
        if (!message.contains(path)) {
            throw new AssertionError("the exception does not name " + path + ": " + message);
        }
    }
}
