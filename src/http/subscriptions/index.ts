/**
 * Subscription delivery, over WebSocket (graphql-ws) and SSE (yoga), on the seams those
 * libraries document:
 *
 * 1. Subscribe: envelop's `subscribe` of the operation's envelope (yoga's recipe for graphql-ws
 *    over SSE and WebSocket alike); `sharedDelivery` sets its subscribe function (envelop's
 *    `setSubscribeFn`): the Pothos `subscribe` resolver opens the feed, and each event is
 *    executed through the Pothos resolvers once for every subscriber asking alike (by a plan,
 *    plain-execution.ts, when the selection only reads the event and no plugin of the user's
 *    may wrap the resolvers; by graphql-js otherwise).
 * 2. Every result then passes envelop's `onSubscribeResult`/`onNext` hooks (masking and any
 *    plugin added later), per subscriber, before it is written. Over WebSocket, on a server with
 *    no plugins of its user's, the only such hook is yoga's masking, which the writer does alike
 *    (resultJson): there a caught-up subscriber is written from the live stage instead (3).
 * 3. Write: SSE through yoga's `onResultProcess` (sse.ts); WebSocket through graphql-ws's
 *    `onOperation` hook, which hands graphql-ws the handle of socket-frames.ts: it writes each
 *    result's shared serialization as the `next` frame and holds its bytes in the connection's
 *    send buffer until the socket took them. Its live stage: while the subscriber waits for its
 *    next event, each event its feed takes is executed (once for everyone asking alike) and
 *    written in the feed's own turn, for every subscriber of the run in the one call that
 *    publishes it, with no promise or loop step per event and subscriber (Channel.deliverTo).
 *
 * Back-pressure is the feeds': they hand over an event only while the connection's send buffer
 * has room (lib/send-buffer.ts), so nothing here queues.
 */
export { ownResults, sharedDelivery, sharedExecution } from './shared-execution.ts';
export { deliverOverSocket, nextFrame, type SocketSubscription } from './socket-frames.ts';
export { sseDelivery, sseStream, streamEventId } from './sse.ts';
