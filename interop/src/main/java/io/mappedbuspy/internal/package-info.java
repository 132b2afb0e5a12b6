/**
 * The internals of the bus: file layouts in memory, mappings and atomics, the wake file, liveness locks, the
 * writers file, consumers' registry, work groups' protocol, rolling directories and their metadata.
 *
 * <p>Not a supported API. Its types are public only so that the library's own packages ({@code io.mappedbuspy},
 * whose types are the supported API, and the Spark connector, {@code io.mappedbuspy.spark}) can use them; any
 * of them may change or go in any release. Code using the bus calls {@code io.mappedbuspy} alone (the samples
 * do; {@code tests/test_layers.py} checks that, and that no public signature there names a type of this package).
 */
package io.mappedbuspy.internal;
