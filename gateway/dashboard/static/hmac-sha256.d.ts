// Types of hmac-sha256.js (plain JavaScript served to the browser; imported by the unit tests).
export declare function sha256(bytes: Uint8Array): Uint8Array;
export declare function hmacSha256(key: Uint8Array, message: Uint8Array): Uint8Array;
export declare function toHex(bytes: Uint8Array): string;
