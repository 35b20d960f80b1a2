// An explorable's experiment, as the KV cache and online softmax pages keep it: the lesson's
// manipulations, each ticked, drawn into `node` and said once, and restored from the server
// (a module of its own: the lesson page, which ships the checklist, does not need it).

import { startOutbox } from "../api.js";
import { checklist, restoreDone, sayDone } from "./checklist.js";

export class Experiment {
  constructor({ lesson, instance, manipulations, node }) {
    Object.assign(this, { lesson, instance, manipulations, node, done: new Set() });
  }

  // The first of `ids` that this lesson counts: ticked, drawn and said if it is new; null if none counts.
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
  }

  // Once the page is drawn: the events waiting on this device sent, and what was done restored.
  start() {
    startOutbox();
    return restoreDone(this.done, { lesson: this.lesson, instance: this.instance }, () => this.draw());
  }
}
