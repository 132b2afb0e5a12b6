package io.mappedbuspy.testing;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/** Marks a public no-argument instance method as a test for {@link TestRunner}. */
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
public @interface Test {
    /**
     * Time limit in seconds; the test fails if it runs longer.
     *
     * @return seconds
     */
    int timeoutSeconds() default 60;
}
