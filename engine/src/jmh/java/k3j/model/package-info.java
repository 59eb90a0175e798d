/** JMH benchmarks of a real-size layer and of the tiny oracle's forward. */
package k3j.model;
