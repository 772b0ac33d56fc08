import { afterEach } from 'vitest';

/** What a test started and must stop: pushed as it starts, disposed after each test, last first. */
export function leftoversAfterEach(): Array<() => Promise<void>> {
  const leftovers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of leftovers.splice(0).reverse()) await dispose();
  });
  return leftovers;
}
