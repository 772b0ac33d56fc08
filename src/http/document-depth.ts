/** How deep (), [] and {} nest in a GraphQL document's text, outside strings and comments. */
export function nesting(source: string) {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '"') {
      const block = source.startsWith('"""', i);
      const end = block ? source.indexOf('"""', i + 3) : stringEnd(source, i);
      if (end < 0) break;
      i = block ? end + 2 : end;
    } else if (c === '#') {
      const end = source.indexOf('\n', i);
      if (end < 0) break;
      i = end;
    } else if (c === '(' || c === '[' || c === '{') {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === ')' || c === ']' || c === '}') {
      depth--;
    }
  }
  return deepest;
}

function stringEnd(source: string, start: number) {
  for (let i = start + 1; i < source.length; i++) {
    if (source[i] === '\\') i++;
    else if (source[i] === '"' || source[i] === '\n') return i;
  }
  return -1;
}
