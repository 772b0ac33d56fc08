/**
 * WebSocket text frames as ws writes them from a server (RFC 6455, 5.2: final, unmasked, no
 * extension), for the `next` frames socket-frames.ts writes to the TCP socket itself. ws would
 * turn each frame's string into bytes again for every subscriber and write header and payload
 * as two chunks; here the payload's bytes, shared by every subscriber of a result, are copied
 * behind the subscription's own head into one buffer, written with one call.
 * test/http/socket-frames.unit.test.ts holds these frames byte for byte to ws's own.
 *
 * A slice of Node's shared 8 KiB pool keeps its whole block alive. A result's body lives as long
 * as its event, so it has memory of its own; so does a frame that will wait (its socket has
 * frames not yet taken: the client is slow, or a burst is being corked). A frame to a socket
 * that keeps up is written at once and dropped, and takes its slice of the pool (faster).
 */

/** `text` in UTF-8, in a buffer of its own (not of the pool: see above). */
export function ownBytes(text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  bytes.write(text);
  return bytes;
}

/**
 * One text frame whose payload is `head` (of `headBytes` bytes in UTF-8) then `body`; `waits`:
 * it will stay a while, in memory of its own (see above).
 */
export function textFrame(head: string, headBytes: number, body: Buffer, waits = false): Buffer {
  const length = headBytes + body.length;
  const offset = length > 0xffff ? 10 : length > 125 ? 4 : 2;
  const frame = waits ? Buffer.allocUnsafeSlow(offset + length) : Buffer.allocUnsafe(offset + length);
  // FIN and the text opcode.
  frame[0] = 0x81;
  if (offset === 2) frame[1] = length;
  else if (offset === 4) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeUInt32BE(0, 2);
    frame.writeUInt32BE(length, 6);
  }
  frame.write(head, offset);
  body.copy(frame, offset + headBytes);
  return frame;
}
