// Exports the function under another name: the exercise must say what it looked for.
export function multiHeadAttn(tokens: number[][], heads: number) {
  return { tokens, heads };
}
