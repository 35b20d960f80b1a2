// @ts-check
// An explorable's experiment: the lesson's manipulations, each ticked, drawn into `node` and said once,
// and restored from this device and the server. Every explorable has one, through the page shell (shell.js).

import { checklist, restoreDone, sayDone } from "./checklist.js";

export class Experiment {
  /**
   * @param {{ lesson: string, instance: string, manipulations: { id: string, text: string }[], node: HTMLElement,
   *   onDraw?: () => void }} options
   */
  constructor({ lesson, instance, manipulations, node, onDraw = () => {} }) {
    this.lesson = lesson;
    this.instance = instance;
    this.manipulations = manipulations;
    this.node = node;
    this.onDraw = onDraw;
    /** @type {Set<string>} the manipulations done */
    this.done = new Set();
  }

  /**
   * The first of `ids` that this lesson counts: ticked, drawn and said if it is new; null if none counts.
   * @param {...(string | null | undefined | (string | null)[])} ids
   * @returns {string | null}
   */
  tick(...ids) {
    const id = ids.flat().find((m) => this.manipulations.some((x) => x.id === m)) ?? null;
    if (id && !this.done.has(id)) {
      this.done.add(id);
      this.draw();
      sayDone(this.done, this.manipulations, id);
    }
    return id;
  }

  draw() {
    this.node.replaceChildren(...checklist(this.done, this.manipulations));
    this.onDraw();
  }

  /** What was done, from the events this device still holds and then from the server. */
  restore() {
    return restoreDone(this.done, { lesson: this.lesson, instance: this.instance }, () => this.draw());
  }
}
