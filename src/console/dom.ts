/** A few DOM helpers: elements built from props and children, text always set as text (never parsed as HTML). */
type Child = Node | string | number | null | undefined | false;
type Props = Record<string, unknown> & { class?: string; on?: Record<string, (event: Event) => void> };

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === 'on') {
      for (const [type, listener] of Object.entries(value as Record<string, (event: Event) => void>))
        element.addEventListener(type, listener);
    } else if (name === 'class') element.className = String(value);
    else if (value === false || value === undefined || value === null) continue;
    else if (name in element && !name.startsWith('aria-') && !name.startsWith('data-'))
      (element as unknown as Record<string, unknown>)[name] = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: Child[]) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces what `parent` holds. */
export function fill(parent: Element, ...children: Child[]) {
  parent.replaceChildren();
  append(parent, children);
}

/** A plain error box: what failed and, when there is one, what to do. */
export function errorBox(message: string) {
  return h('p', { class: 'error', role: 'alert' }, message);
}
