package io.mappedbuspy.testing;

import java.util.Arrays;
import java.util.Objects;

/** The few assertions the tests need (JUnit is not available). */
public final class Assert {
    private Assert() {
    }

    /** Code expected to throw. */
    @FunctionalInterface
    public interface ThrowingRunnable {
        /**
         * Runs the code.
         *
         * @throws Throwable anything
         */
        void run() throws Throwable;
    }

    /**
     * Fails the test.
     *
     * @param message why
     */
    public static void fail(String message) {
        throw new AssertionError(message);
    }

    /**
     * Fails unless the condition holds.
     *
     * @param message   what was expected
     * @param condition the condition
     */
    public static void assertTrue(String message, boolean condition) {
        if (!condition) {
            fail(message);
        }
    }

    /**
     * Fails if the condition holds.
     *
     * @param message   what was expected
     * @param condition the condition
     */
    public static void assertFalse(String message, boolean condition) {
        if (condition) {
            fail(message);
        }
    }

    /**
     * Fails unless the values are equal.
     *
     * @param message  what is compared
     * @param expected expected value
     * @param actual   actual value
     */
    public static void assertEquals(String message, Object expected, Object actual) {
        if (!Objects.equals(expected, actual)) {
            fail(message + ": expected <" + expected + "> but was <" + actual + ">");
        }
    }

    /**
     * Fails unless the longs are equal.
     *
     * @param message  what is compared
     * @param expected expected value
     * @param actual   actual value
     */
    public static void assertEquals(String message, long expected, long actual) {
        if (expected != actual) {
            fail(message + ": expected <" + expected + "> but was <" + actual + ">");
        }
    }

    /**
     * Fails unless the arrays are equal.
     *
     * @param message  what is compared
     * @param expected expected bytes
     * @param actual   actual bytes
     */
    public static void assertArrayEquals(String message, byte[] expected, byte[] actual) {
        if (!Arrays.equals(expected, actual)) {
            fail(message + ": expected " + Arrays.toString(expected) + " but was " + Arrays.toString(actual));
        }
    }

    /**
     * Fails unless the code throws an exception of the given class (or a subclass).
     *
     * @param type expected exception class
     * @param code the code
     * @param <T>  the exception type
     * @return the exception thrown
     */
    public static <T extends Throwable> T assertThrows(Class<T> type, ThrowingRunnable code) {
        try {
            code.run();
        } catch (Throwable t) {
            if (type.isInstance(t)) {
                return type.cast(t);
            }
            AssertionError e = new AssertionError("expected " + type.getName() + " but got " + t);
            e.initCause(t);
            throw e;
        }
        throw new AssertionError("expected " + type.getName() + " but nothing was thrown");
    }

    /**
     * Fails unless {@code text} contains {@code part}.
     *
     * @param text the text
     * @param part expected substring
     */
    public static void assertContains(String text, String part) {
        if (text == null || !text.contains(part)) {
            fail("expected <" + text + "> to contain <" + part + ">");
        }
    }
}
