package io.mappedbuspy;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import io.mappedbuspy.internal.WakeFile;

/**
 * The Java side of tests/jvm/test_wake_java.py: a reader parked in waitNext that the Python writer must wake, and a writer
 * whose records must wake a parked Python reader. Records carry the writer's CLOCK_MONOTONIC time (System.nanoTime,
 * time.monotonic_ns) in their first 8 bytes, little-endian, so either side reports the wake-up's latency.
 *
 * <pre>
 *  WakeChild read PATH FILE_SIZE RECORD_SIZE COUNT PARK_NS
 *      prints "ready" once open (the native library loaded or not: "ready native" / "ready polling"), then for each
 *      record "got INDEX LATENCY_NS"; waits in waitNext with IdleStrategy.PARK and park bounds PARK_NS
 *  WakeChild write PATH FILE_SIZE RECORD_SIZE
 *      prints "ready native" / "ready polling", then for each stdin line "go" writes one record and prints "wrote";
 *      ends at end of input
 * </pre>
 */
public final class WakeChild {
    private WakeChild() {
    }

    public static void main(String[] args) throws Exception {
        String path = args[1];
        long fileSize = Long.parseLong(args[2]);
        int recordSize = Integer.parseInt(args[3]);
        String lib = WakeFile.nativeLoaded() ? "native" : "polling";
        switch (args[0]) {
            case "read": {
                int count = Integer.parseInt(args[4]);
                long parkNs = Long.parseLong(args[5]);
                try (MappedBusReader r = new MappedBusReader(path, fileSize, recordSize).open(10_000)) {
                    r.setIdleStrategy(IdleStrategy.PARK).setParkNanos(parkNs).setParkMaxNanos(parkNs);
                    System.out.println("ready " + lib);
                    System.out.flush();
                    byte[] buf = new byte[recordSize];
                    for (int i = 0; i < count; i++) {
                        if (!r.waitNext(60, TimeUnit.SECONDS)) {
                            System.out.println("timeout " + i);
                            return;
                        }
                        long now = System.nanoTime();
                        r.readBuffer(buf, 0);
                        long sent = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
                        System.out.println("got " + i + " " + (now - sent));
                        System.out.flush();
                    }
                }
                break;
            }
            case "write": {
                try (MappedBusWriter w = new MappedBusWriter(path, fileSize, recordSize).open();
                     BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    System.out.println("ready " + lib);
                    System.out.flush();
                    byte[] buf = new byte[8];
                    for (String line; (line = in.readLine()) != null; ) {
                        if (!line.trim().equals("go")) {
                            continue;
                        }
                        ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).putLong(0, System.nanoTime());
                        w.write(buf, 0, 8);
                        System.out.println("wrote");
                        System.out.flush();
                    }
                }
                break;
            }
            default:
                throw new IllegalArgumentException("usage: WakeChild read|write PATH FILE_SIZE RECORD_SIZE ...");
        }
    }
}
