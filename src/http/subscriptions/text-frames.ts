/**
 * WebSocket text frames as ws writes them from a server (RFC 6455, 5.2: final, unmasked, no
 * extension), for the `next` frames socket-frames.ts writes to the TCP socket itself. ws would
 * turn each frame's string into bytes again for every subscriber and write header and payload
 * as two chunks; here the payload's bytes, shared by every subscriber of a result, are copied
 * behind the subscription's own head into one buffer, written with one call.
 * test/http/socket-frames.test.ts holds these frames byte for byte to ws's own.
 */

/** One text frame whose payload is `head` then `body`. */
export function textFrame(head: Buffer, body: Buffer): Buffer {
  const length = head.length + body.length;
  const offset = length > 0xffff ? 10 : length > 125 ? 4 : 2;
  const frame = Buffer.allocUnsafe(offset + length);
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
  head.copy(frame, offset);
  body.copy(frame, offset + head.length);
  return frame;
}
