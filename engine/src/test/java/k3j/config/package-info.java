/** Unit tests of the config reader on the released config and its file-level refusals. */
package k3j.config;
