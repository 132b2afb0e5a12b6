package io.mappedbuspy.samples;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.messages.Token;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.List;

/**
 * Token ring sample, the twin of {@code samples/token_ring.py}: {@code TokenRing <id> <number_of_nodes>}. Every node
 * reads every record on one bus and reacts only to tokens addressed to it: it prints
 * {@code Node 1 received Token [from=0, to=1]} and sends {@code Token(from=id, to=(id+1) % N)}. Node 0 starts the
 * ring and, after {@code --rounds} full rounds, sends {@code Token(from=0, to=-1)}, on which every node stops.
 *
 * <p>Node 0 makes the bus file (swapping a fresh one in atomically) and removes it when it exits; the other
 * nodes wait for the file and read it from its first record, so a node started late still sees the token.
 */
public final class TokenRing {
    static final String DEFAULT_PATH = SampleArgs.defaultPath("mappedbus-sample-token");
    static final long FILE_SIZE = 2_000_000L;
    static final int RECORD_SIZE = 8;
    /** The {@code to} of the token that ends the ring. */
    static final int STOP = -1;

    private static final String USAGE = String.join("\n",
            "usage: TokenRing <id> <number_of_nodes> [--rounds N] [--interval SECONDS] [--timeout SECONDS] [--path FILE]",
            "  --rounds N      full rounds before node 0 stops the ring (default 5)",
            "  --interval S    seconds a node holds the token before passing it on (default 0.2)",
            "  --timeout S     give up after this many seconds without a token (default 30)",
            "  --path FILE     bus file (default " + DEFAULT_PATH + ")");

    private TokenRing() {
    }

    /**
     * Runs one node.
     *
     * @param args the command line, see the usage
     */
    public static void main(String[] args) {
        SampleArgs.exit("TokenRing", USAGE, () -> {
            SampleArgs a = new SampleArgs(args, List.of("--rounds", "--interval", "--timeout", "--path"), List.of());
            a.expectPositionals(2);
            int id = a.positionalInt(0, "id");
            int nodes = a.positionalInt(1, "number_of_nodes");
            int rounds = a.intOption("--rounds", 5);
            double interval = a.secondsOption("--interval", 0.2);
            double timeout = a.secondsOption("--timeout", 30);
            String path = a.stringOption("--path", DEFAULT_PATH);
            if (nodes < 1 || id < 0 || id >= nodes) {
                throw new SampleArgs.UsageException("need 0 <= id < number_of_nodes");
            }
            if (rounds < 1) {
                throw new SampleArgs.UsageException("--rounds must be at least 1");
            }
            if (((long) rounds * nodes + 2) * (8 + RECORD_SIZE) + 8 > FILE_SIZE) {
                throw new SampleArgs.UsageException(rounds + " rounds of " + nodes
                        + " nodes do not fit in one bus file");
            }
            if (id == 0) {
                createBus(path);
                // Runs on a normal exit and on SIGINT/SIGTERM. Every node has the file mapped by the time the
                // ring stops (each held the token), so it can go.
                Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                    try {
                        Layout.removeBus(path);   // the bus and every side file (wake, writers, ...)
                    } catch (IOException e) {
                        // Nothing to do while exiting.
                    }
                }));
            } else if (!waitForFile(path, timeout)) {
                System.err.println("TokenRing: no bus file " + path + " after " + timeout + " s (is node 0 running?)");
                return 1;
            }
            return run(id, nodes, rounds, interval, timeout, path);
        });
    }

    /** Node 0: a fresh, initialised bus file, swapped in so that no node opens a half-made or old one. */
    private static void createBus(String path) throws IOException {
        Path tmp = Paths.get(path + "." + ProcessHandle.current().pid() + ".tmp");
        new MappedBusWriter(tmp.toString(), FILE_SIZE, RECORD_SIZE).open().close();
        // Its side files go along (the metadata: sizes, id; the writers file), as in samples/token_ring.py; an old
        // ring's side files that the new bus has none of go, so nothing of the old bus stays beside the new one.
        List<String> from = Layout.sideFiles(tmp.toString());
        List<String> to = Layout.sideFiles(path);
        for (int i = 0; i < from.size(); i++) {
            Path src = Paths.get(from.get(i));
            Path dst = Paths.get(to.get(i));
            if (Files.isRegularFile(src, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                Files.move(src, dst, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } else if (Files.isRegularFile(dst, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                Files.delete(dst);
            }
        }
        Files.move(tmp, Paths.get(path), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    private static boolean waitForFile(String path, double timeout) throws InterruptedException {
        long deadline = System.nanoTime() + (long) (timeout * 1e9);
        while (!Files.exists(Paths.get(path))) {
            if (System.nanoTime() >= deadline) {
                return false;
            }
            Thread.sleep(10);
        }
        return true;
    }

    private static int run(int id, int nodes, int rounds, double interval, double timeout, String path)
            throws Exception {
        long idleNanos = (long) (timeout * 1e9);
        Token token = new Token();
        SampleArgs.Backoff backoff = new SampleArgs.Backoff();
        int received = 0;
        int completed = 0;
        try (MappedBusWriter writer = new MappedBusWriter(path, FILE_SIZE, RECORD_SIZE).open();
             MappedBusReader reader = new MappedBusReader(path, FILE_SIZE, RECORD_SIZE).open()) {
            if (id == 0) {
                writer.write(new Token(0, 1 % nodes));
            }
            long lastSeen = System.nanoTime();
            for (;;) {
                if (!reader.next()) {
                    if (System.nanoTime() - lastSeen >= idleNanos) {
                        System.err.println("TokenRing: node " + id + " saw no token for " + timeout + " s");
                        return 1;
                    }
                    backoff.idle();
                    continue;
                }
                backoff.reset();
                lastSeen = System.nanoTime();
                reader.readMessage(token);
                if (token.getTo() == STOP) {
                    System.out.println("Node " + id + " done: received " + received + " tokens");
                    return 0;
                }
                if (token.getTo() != id) {
                    continue;
                }
                received++;
                System.out.println("Node " + id + " received " + token);
                SampleArgs.sleep(interval);
                if (id == 0 && ++completed >= rounds) {
                    // Node 0 stops when it reads its own stop token, like the others.
                    writer.write(new Token(0, STOP));
                    continue;
                }
                writer.write(new Token(id, (id + 1) % nodes));
            }
        }
    }
}
