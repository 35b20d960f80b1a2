// @ts-check
// The one debounced emitter of an explorable's `parameter-changed` events: to the API (through the
// offline queue) and to a host page (postMessage). A burst of changes of one kind is one event; a
// change of another kind (a manipulation, another parameter) never cancels a pending one.

import { queueEvent } from "./api.js";
import { post } from "./embed.js";
import { currentHash } from "./hash-state.js";

export function parameterEvents({ lesson, instance, checkpoint = "experiment", delay = 400 }) {
  const pending = new Map();
  return function emit(data, kind = `${data.parameter}:${data.manipulation || ""}`) {
    clearTimeout(pending.get(kind));
    pending.set(
      kind,
      setTimeout(() => {
        pending.delete(kind);
        queueEvent({ lesson, checkpoint, event: "parameter-changed", instance_id: instance, data });
        post({ type: "parameter-changed", instanceId: instance, data, hash: currentHash() });
      }, delay),
    );
  };
}
