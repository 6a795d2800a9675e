#!/usr/bin/env bash
# The main job: train a small German->English Transformer on Multi30k (about 8 minutes on 2 CPU
# cores), score it on test_2016_flickr with sacreBLEU, translate a few sentences, draw attention.
#
#   bash scripts/main_job.sh [DATA_DIR]
#
# DATA_DIR holds multi30k/<split>.<lang>.gz (default: $ATTNKIT_DATA, else ~/.cache/attnkit, where
# the files are downloaded on first use). Extra arguments after DATA_DIR go to `attnkit train`.
set -euo pipefail
DATA_DIR=${1:-${ATTNKIT_DATA:-$HOME/.cache/attnkit}}
shift || true
RUN=runs/multi30k_de_en_tiny
CKPT=$RUN/checkpoint_best.pt

attnkit train --config configs/multi30k_de_en_tiny.yaml --data-dir "$DATA_DIR" --output-dir "$RUN" --overwrite "$@"

echo "== test_2016_flickr, beam 4 =="
attnkit evaluate --checkpoint "$CKPT" --data-dir "$DATA_DIR" --split test_2016_flickr --beam 4 --lowercase

echo "== translations =="
printf '%s\n' \
  "Kannst du mir helfen, diesen Satz zu übersetzen?" \
  "Ein Mann fährt mit dem Fahrrad eine Straße entlang." \
  "Zwei Hunde spielen im Schnee." \
  "Eine Frau mit einem roten Hut sitzt auf einer Bank." > "$RUN/examples.de"
attnkit translate --checkpoint "$CKPT" --beam 4 --input "$RUN/examples.de" --output "$RUN/examples.en"
paste "$RUN/examples.de" "$RUN/examples.en" | sed 's/\t/\n    -> /'

echo "== attention =="
# An in-domain sentence first (Multi30k is image captions): its cross-attention follows the words.
attnkit attention --checkpoint "$CKPT" --text "Ein Mann fährt mit dem Fahrrad eine Straße entlang." --output "$RUN/attention.png"
# The seeds' sentence, far outside the captions' domain: the model's output and attention go astray.
attnkit attention --checkpoint "$CKPT" --text "Kannst du mir helfen, diesen Satz zu übersetzen?" --output "$RUN/attention_seeds.png"
attnkit plot-positional --d-model 512 --max-len 128 --output "$RUN/positional_encoding.png"
