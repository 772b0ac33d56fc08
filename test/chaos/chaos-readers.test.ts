/** Chaos in short mode (test/chaos/short-mode.ts): stream readers: expired iterators, lost answers, stalled subscribers and lease holders. */
import { shortMode } from './short-mode.ts';

shortMode('readers');
