package k3j.serve;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * A refused request as the OpenAI API words it: an HTTP status and {@code {"error": {"message", "type", "param", "code"}}}.
 */
final class ApiError extends RuntimeException {
    final int status;
    final String type;
    final String param;
    final String code;
    /** Seconds a client should wait before it tries again (429, 503), or 0: no Retry-After. */
    final int retryAfter;

    ApiError(int status, String type, String param, String code, String message, int retryAfter) {
        super(message);
        this.status = status;
        this.type = type;
        this.param = param;
        this.code = code;
        this.retryAfter = retryAfter;
    }

    /** 400: a field is missing, of the wrong type or out of its range. */
    static ApiError invalid(String param, String message) {
        return new ApiError(400, "invalid_request_error", param, null, message, 0);
    }

    /** 400 with a code of its own (context_length_exceeded, invalid_json, ...). */
    static ApiError invalid(String param, String code, String message) {
        return new ApiError(400, "invalid_request_error", param, code, message, 0);
    }

    ObjectNode json() {
        ObjectNode root = JsonNodeFactory.instance.objectNode();
        ObjectNode e = root.putObject("error");
        e.put("message", getMessage());
        e.put("type", type);
        if (param == null) e.putNull("param");
        else e.put("param", param);
        if (code == null) e.putNull("code");
        else e.put("code", code);
        return root;
    }
}
