package io.mappedbuspy.testing;

import java.io.File;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.stream.Stream;

/**
 * Runs {@link Test} methods. With no arguments it runs every class named {@code *Test} in the jar or
 * directory this class was loaded from; otherwise the classes named (and, with {@code Class#method},
 * just that method). Prints each failure with its stack trace and ends with the line
 * {@code N passed, N failed}; exits 1 if anything failed.
 */
public final class TestRunner {
    private int passed;
    private int failed;

    private TestRunner() {
    }

    /**
     * Runs the tests.
     *
     * @param args class names (optionally {@code Class#method}); none for all
     * @throws Exception if the test classes cannot be listed
     */
    public static void main(String[] args) throws Exception {
        List<String> targets = new ArrayList<>(List.of(args));
        if (targets.isEmpty()) {
            targets.addAll(discover());
        }
        TestRunner runner = new TestRunner();
        for (String target : targets) {
            int hash = target.indexOf('#');
            String cls = hash < 0 ? target : target.substring(0, hash);
            String only = hash < 0 ? null : target.substring(hash + 1);
            runner.runClass(Class.forName(cls), only);
        }
        TestFiles.deleteAll();
        System.out.println(runner.passed + " passed, " + runner.failed + " failed");
        System.out.flush();
        System.exit(runner.failed == 0 ? 0 : 1);
    }

    private static List<String> discover() throws IOException, URISyntaxException {
        Path where = Paths.get(TestRunner.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<String> names = new ArrayList<>();
        if (Files.isDirectory(where)) {
            try (Stream<Path> s = Files.walk(where)) {
                s.forEach(p -> names.add(where.relativize(p).toString().replace(File.separatorChar, '/')));
            }
        } else {
            try (JarFile jar = new JarFile(where.toFile())) {
                for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
                    names.add(e.nextElement().getName());
                }
            }
        }
        List<String> classes = new ArrayList<>();
        for (String n : names) {
            if (n.endsWith("Test.class") && !n.contains("$")) {
                classes.add(n.substring(0, n.length() - ".class".length()).replace('/', '.'));
            }
        }
        classes.sort(Comparator.naturalOrder());
        return classes;
    }

    private void runClass(Class<?> cls, String only) {
        List<Method> tests = new ArrayList<>();
        for (Method m : cls.getMethods()) {
            if (m.isAnnotationPresent(Test.class) && !Modifier.isStatic(m.getModifiers())
                    && (only == null || only.equals(m.getName()))) {
                tests.add(m);
            }
        }
        tests.sort(Comparator.comparing(Method::getName));
        for (Method m : tests) {
            runOne(cls, m);
        }
    }

    private void runOne(Class<?> cls, Method m) {
        String name = cls.getSimpleName() + "." + m.getName();
        long start = System.nanoTime();
        FutureTask<Void> task = new FutureTask<>(() -> {
            Object instance = cls.getDeclaredConstructor().newInstance();
            m.invoke(instance);
            return null;
        });
        Thread t = new Thread(task, name);
        t.setDaemon(true); // a hung test must not keep the JVM alive
        t.start();
        Throwable failure = null;
        try {
            task.get(m.getAnnotation(Test.class).timeoutSeconds(), TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            failure = new AssertionError("timed out after " + m.getAnnotation(Test.class).timeoutSeconds() + " s");
            t.interrupt();
        } catch (ExecutionException e) {
            failure = e.getCause() instanceof InvocationTargetException ? e.getCause().getCause() : e.getCause();
        } catch (InterruptedException e) {
            failure = e;
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        if (failure == null) {
            passed++;
            System.out.println("PASS " + name + " (" + ms + " ms)");
        } else {
            failed++;
            System.out.println("FAIL " + name + " (" + ms + " ms)");
            failure.printStackTrace(System.out);
        }
        System.out.flush();
    }
}
