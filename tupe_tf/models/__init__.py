"""keras-hub models of tupe-tf."""

from tupe_tf.models.tupe_backbone import POSITION_ENCODINGS
from tupe_tf.models.tupe_backbone import SEGMENT_ENCODINGS
from tupe_tf.models.tupe_backbone import TupeBackbone
