/** The console's text colors against its backgrounds (the page's, and the panel behind output text): at least 7:1 (WCAG AAA for normal text), as README says. */
import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';

const css = readFileSync('src/console/style.css', 'utf8');
const variable = (name: string) => {
  const value = new RegExp(`--${name}:\\s*(#[0-9a-f]{3,6})`, 'i').exec(css)?.[1];
  if (!value) throw new Error(`no --${name} in style.css`);
  return value;
};

/** WCAG relative luminance of #rgb or #rrggbb. */
function luminance(hex: string) {
  const digits = hex.length === 4 ? [...hex.slice(1)].map((d) => d + d) : [hex.slice(1, 3), hex.slice(3, 5), hex.slice(5, 7)];
  const [r, g, b] = digits.map((d) => {
    const c = Number.parseInt(d, 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

const contrast = (a: string, b: string) => {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (light + 0.05) / (dark + 0.05);
};

test.each(['fg', 'muted', 'accent', 'warn', 'bad', 'good'])('--%s on the background is at least 7:1', (name) => {
  expect(contrast(variable(name), variable('bg'))).toBeGreaterThanOrEqual(7);
});

// Output text and JSON sit on the panel color.
test.each(['fg', 'muted', 'accent', 'warn', 'bad', 'good'])('--%s on the output panel is at least 7:1', (name) => {
  expect(contrast(variable(name), variable('panel'))).toBeGreaterThanOrEqual(7);
});
