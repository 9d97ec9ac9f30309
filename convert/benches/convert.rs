//! Conversion throughput on one core: `cargo bench -p kafluss-convert --bench convert`.
//! Each iteration converts one partition batch of `workloads::batch()` records (1000) into an Arrow
//! batch; criterion reports elements (rows) per second of wall time.

mod workloads;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kafluss_convert::JsonScratch;

fn conversion(c: &mut Criterion) {
    for (_, build) in workloads::all() {
        let workload = build();
        let mut scratch = JsonScratch::default();
        let records = workload.records();
        // Fail loudly instead of timing an error path.
        workload
            .plan
            .convert_batch_with(&mut scratch, records.iter().copied())
            .expect("bench input converts");
        let mut group = c.benchmark_group(workload.name);
        group.throughput(Throughput::Elements(records.len() as u64));
        let id = format!(
            "{} records, {} B avg",
            records.len(),
            workload.average_value_len()
        );
        group.bench_function(id, |b| {
            b.iter(|| {
                let batch = workload
                    .plan
                    .convert_batch_with(&mut scratch, black_box(records.iter().copied()))
                    .expect("converts");
                black_box(batch)
            })
        });
        group.finish();
    }
}

criterion_group!(benches, conversion);
criterion_main!(benches);
