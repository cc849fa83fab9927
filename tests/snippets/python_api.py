import segtk

model = segtk.load_model("demo")                 # any --model spec, or your own Segmenter
data = segtk.load_dataset("demo", limit=2)       # any --data spec; items: .name .image .label
result = segtk.attack(model, data, attack="dla", budget=50, eps=8, seed=0)
print(f"mIoU {result.clean_miou:.2f}% -> {result.adv_miou:.2f}%")
record = result.records[0]                       # one per image, as results.jsonl holds it
print(record["image"], record["queries"], record["linf"], result.images[record["image"]].shape)

table = segtk.bench_attacks("demo", "demo", attacks="dla,random", budgets=[10, 50],
                            repeats=1, limit=2)  # out=None: in memory, nothing written
for row in table:                                # or table.to_pandas()
    print(row["attack"], row["budget"], f"{row['miou_mean']:.2f}")
