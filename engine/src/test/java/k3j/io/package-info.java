/** Unit tests of the safetensors reader, the checkpoint index, tensor reads and widening. */
package k3j.io;
